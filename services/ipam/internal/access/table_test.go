package access

import (
	"strings"
	"testing"

	"github.com/beaconlb/beacon/pkg/spiffeid"
	"github.com/beaconlb/beacon/proto/apimethods"
)

var roles = []spiffeid.Role{spiffeid.Gateway, spiffeid.Admin, spiffeid.Adapter, spiffeid.Announcer}

// want is the authorization issue #14 asks of the IPAM, written from its
// prose independently of Table, so that the table is checked against the
// spec and not against itself.
func want(method string, role spiffeid.Role) Access {
	svc, m, _ := strings.Cut(strings.TrimPrefix(method, "/beacon.ipam.v1."), "/")
	switch role {
	case spiffeid.Gateway, spiffeid.Admin:
		return Allow
	case spiffeid.Announcer:
		// Its own node's session, nothing else.
		if method == "/beacon.ipam.v1.AnnouncerService/Subscribe" {
			return OwnNode
		}
	case spiffeid.Adapter:
		// Acts only in its own tenant.
		switch svc {
		case "AllocationService", "AnnouncementService", "AuditService":
			return Own
		case "AnnouncerService":
			if m != "Subscribe" {
				return Own
			}
		case "TenantService":
			if m == "GetTenant" {
				return Own
			}
		case "PoolService":
			if strings.HasPrefix(m, "Get") || strings.HasPrefix(m, "List") {
				return OwnPools
			}
			return OwnPool
		}
	}
	return Deny
}

// TestTableCoversEveryMethod checks Table against the descriptors: a new
// RPC without a row fails here, as does a row for an RPC that is gone.
func TestTableCoversEveryMethod(t *testing.T) {
	methods := apimethods.Methods()
	if len(methods) < 50 {
		t.Fatalf("only %d methods found; are the descriptors registered?", len(methods))
	}
	seen := map[string]bool{}
	for _, md := range methods {
		name := apimethods.FullMethod(md)
		seen[name] = true
		if _, ok := table[name]; !ok {
			t.Errorf("no row for %s", name)
		}
	}
	for name := range table {
		if !seen[name] {
			t.Errorf("row %s names no method of %s", name, apimethods.APIPackage)
		}
	}
}

// TestTableMatchesSpec checks every cell of the table.
func TestTableMatchesSpec(t *testing.T) {
	for _, md := range apimethods.Methods() {
		name := apimethods.FullMethod(md)
		for _, role := range roles {
			if got, w := table[name].For(role), want(name, role); got != w {
				t.Errorf("%s for %s: %s, want %s", name, role, got, w)
			}
		}
	}
}
