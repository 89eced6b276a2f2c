package policy_test

import (
	"strings"
	"testing"

	"github.com/beaconlb/beacon/proto/apimethods"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/gateway/internal/policy"
)

// Roles are every role a caller can have.
var Roles = []ipamv1.Role{ipamv1.Role_ROLE_ADMIN, ipamv1.Role_ROLE_VIEWER, ipamv1.Role_ROLE_TENANT, ipamv1.Role_ROLE_ANNOUNCER}

// want is the authorization the gateway must apply, written from the
// issue's prose independently of the table, so that the table is checked
// against the spec and not against itself.
func want(method string, role ipamv1.Role) policy.Access {
	svc, m, _ := strings.Cut(strings.TrimPrefix(method, "/beacon.ipam.v1."), "/")
	if m == "VerifyToken" || m == "WatchTokenRevocations" || m == "CreateNodeCertificate" {
		return policy.Deny // never through the gateway
	}
	read := strings.HasPrefix(m, "Get") || strings.HasPrefix(m, "List") || strings.HasPrefix(m, "Watch")
	switch role {
	case ipamv1.Role_ROLE_ADMIN:
		return policy.Allow
	case ipamv1.Role_ROLE_VIEWER:
		if read {
			return policy.Allow
		}
	case ipamv1.Role_ROLE_TENANT:
		switch svc {
		case "AllocationService", "AnnouncementService", "AuditService":
			return policy.Own
		case "PoolService":
			if read {
				return policy.OwnPools
			}
		case "AnnouncerService":
			if m != "Subscribe" {
				return policy.Own
			}
		case "TenantService":
			if m == "GetTenant" {
				return policy.Own
			}
		}
	case ipamv1.Role_ROLE_ANNOUNCER:
		if method == "/beacon.ipam.v1.AnnouncerService/Subscribe" {
			return policy.Own
		}
	}
	return policy.Deny
}

// TestTableCoversEveryMethod checks the table against the descriptors
// compiled into the binary: a new RPC without a row fails here, as does a
// row for an RPC that no longer exists.
func TestTableCoversEveryMethod(t *testing.T) {
	methods := apimethods.Methods()
	if len(methods) < 50 {
		t.Fatalf("only %d methods found in %s; are the descriptors registered?", len(methods), apimethods.APIPackage)
	}
	table := policy.Table()
	seen := map[string]bool{}
	for _, md := range methods {
		name := apimethods.FullMethod(md)
		seen[name] = true
		if _, ok := table[name]; !ok {
			t.Errorf("%s has no row in the authorization table", name)
		}
	}
	for name := range table {
		if !seen[name] {
			t.Errorf("table row %s names no method of %s", name, apimethods.APIPackage)
		}
	}
}

// TestTableCellByCell checks every method × role cell against want.
func TestTableCellByCell(t *testing.T) {
	table := policy.Table()
	for _, md := range apimethods.Methods() {
		name := apimethods.FullMethod(md)
		rule := table[name] // no row: the zero Rule denies everyone
		for _, role := range Roles {
			if got, w := rule.For(role), want(name, role); got != w {
				t.Errorf("%s × %s = %v, want %v", name, role, got, w)
			}
		}
		if got := rule.For(ipamv1.Role_ROLE_UNSPECIFIED); got != policy.Deny {
			t.Errorf("%s × unspecified role = %v, want deny", name, got)
		}
	}
}

func TestStreamingMethodsAreKnown(t *testing.T) {
	var streams []string
	for _, md := range apimethods.Methods() {
		if md.IsStreamingClient() || md.IsStreamingServer() {
			streams = append(streams, apimethods.FullMethod(md))
		}
	}
	// WatchTokenRevocations is the gateway's own, denied to every caller.
	want := "/beacon.ipam.v1.AllocationService/WatchAllocations /beacon.ipam.v1.AnnouncerService/Subscribe /beacon.ipam.v1.TokenService/WatchTokenRevocations"
	if got := strings.Join(streams, " "); got != want {
		t.Errorf("streaming methods = %s, want %s (a new stream needs its scoping thought through)", got, want)
	}
}
