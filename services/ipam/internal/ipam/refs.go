package ipam

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strings"
)

// AllocationID returns the ID of the allocation of owner: "a" and the first 20
// hex digits of the SHA-256 of owner. Deriving it makes Allocate idempotent
// per owner with no separate owner index: the owner's allocation has exactly
// one possible key.
func AllocationID(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return "a" + hex.EncodeToString(sum[:10])
}

// Count returns how many addresses per family the allocation asks for.
func (a *Allocation) Count() int {
	return max(a.AddressCount, 1)
}

// RefOf returns the ref of an allocation or hold by tenant and ID.
func RefOf(kind Kind, tenant, id string) Ref {
	return Ref{Kind: kind, ID: tenant + "/" + id}
}

// ClaimRef returns the ref of the claim of an address (of an IPv4-mapped
// IPv6 address, its IPv4 form's).
func ClaimRef(a netip.Addr) Ref { return Ref{Kind: KindClaim, ID: a.Unmap().String()} }

// TenantGuardRef returns the ref of the guard of a tenant's quota.
func TenantGuardRef(tenant string) Ref {
	return Ref{Kind: KindTenantGuard, ID: tenant}
}

// ShareRef returns the ref of the guard of a tenant's sharing key.
func ShareRef(tenant, key string) Ref {
	return Ref{Kind: KindShare, ID: tenant + "/" + key}
}

// GroupRef returns the ref of a global group by "pool/group".
func GroupRef(key string) Ref { return Ref{Kind: KindGlobalGroup, ID: key} }

// GroupShareRef returns the ref of the guard of a global group's addresses
// (see Share): every plan that takes a new address for the group writes it.
func GroupShareRef(key string) Ref { return ShareRef("", key) }

// GroupName returns the resource name of a global group "pool/group".
func GroupName(key string) string {
	pool, group, _ := strings.Cut(key, "/")
	return "pools/" + pool + "/globalGroups/" + group
}
