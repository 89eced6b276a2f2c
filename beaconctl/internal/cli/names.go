package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// poolName turns "web" or "pools/web" into "pools/web".
func poolName(s string) (string, error) {
	id, err := poolID(s)
	if err != nil {
		return "", err
	}
	return "pools/" + id, nil
}

// poolID turns "web" or "pools/web" into "web".
func poolID(s string) (string, error) {
	id := strings.TrimPrefix(s, "pools/")
	if id == "" || strings.Contains(id, "/") {
		return "", fmt.Errorf("invalid pool name %q: want NAME or pools/NAME", s)
	}
	return id, nil
}

// tenantParent turns "acme" or "tenants/acme" into "tenants/acme"; "-" means
// every tenant where the API allows it.
func tenantParent(s string) (string, error) {
	id := strings.TrimPrefix(s, "tenants/")
	if id == "" || strings.Contains(id, "/") {
		return "", fmt.Errorf("invalid tenant %q: want TENANT or tenants/TENANT", s)
	}
	return "tenants/" + id, nil
}

// splitAllocationName splits "tenants/T/allocations/ID" into its parent
// "tenants/T" and reports whether s has that form.
func splitAllocationName(s string) (parent string, ok bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 4 || parts[0] != "tenants" || parts[2] != "allocations" || parts[1] == "" || parts[3] == "" {
		return "", false
	}
	return "tenants/" + parts[1], true
}

// allocationIDForOwner is the ID the server gives an owner's allocation: "a"
// followed by the first 20 hex digits of the SHA-256 of the owner, as
// documented on Allocation.name.
func allocationIDForOwner(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return "a" + hex.EncodeToString(sum[:])[:20]
}

// allocationRef is an allocation named on the command line: by its name, or
// by its owner within a tenant.
type allocationRef struct {
	// Name is always set: given, or derived from Parent and Owner.
	Name string
	// Parent and Owner are set when the allocation was named by its owner.
	Parent string
	Owner  string
}

// parseAllocationRef reads the NAME | OWNER --tenant T argument of the
// allocation commands. A full name is taken as a name (its tenant must match
// --tenant if that is given); anything else needs --tenant and is an owner.
func parseAllocationRef(arg, tenant string) (allocationRef, error) {
	if arg == "" {
		return allocationRef{}, fmt.Errorf("empty allocation name or owner")
	}
	if parent, ok := splitAllocationName(arg); ok {
		if tenant != "" {
			want, err := tenantParent(tenant)
			if err != nil {
				return allocationRef{}, err
			}
			if want != parent {
				return allocationRef{}, fmt.Errorf("allocation %s is not in --tenant %s", arg, tenant)
			}
		}
		return allocationRef{Name: arg}, nil
	}
	if tenant == "" {
		return allocationRef{}, fmt.Errorf("%q is not an allocation name (tenants/TENANT/allocations/ID); to name an allocation by its owner, add --tenant", arg)
	}
	parent, err := tenantParent(tenant)
	if err != nil {
		return allocationRef{}, err
	}
	if parent == "tenants/-" {
		return allocationRef{}, fmt.Errorf("--tenant - (every tenant) cannot name one allocation")
	}
	return allocationRef{
		Name:   parent + "/allocations/" + allocationIDForOwner(arg),
		Parent: parent,
		Owner:  arg,
	}, nil
}
