// Package metallb converts MetalLB's configuration resources (IPAddressPool,
// L2Advertisement, BGPAdvertisement, BGPPeer, BFDProfile, Community), read as
// unstructured objects, into the IPAM's pools and announcement resources, and
// names them. It is plain Go: it takes the objects' fields as
// map[string]any, so it needs neither client-go nor generated types.
//
// Only internal/kube imports this package.
package metallb

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxID is the longest IPAM resource ID.
const maxID = 63

// PoolID returns the IPAM pool ID of the MetalLB IPAddressPool
// namespace/name in tenant's cluster. Pools are global in the IPAM, so the
// ID starts with the tenant: "{tenant}-{name}" when that is a valid ID,
// else a cleaned and shortened form of it with a hash of
// tenant/namespace/name. Two tenants' pools can still share an ID (tenant
// "a-b"'s "c" and tenant "a"'s "b-c"): the IPAM refuses the second, and
// the adapter says so (PoolIDTaken). The IDs cannot change without moving
// every existing pool's addresses.
func PoolID(tenant, namespace, name string) string {
	return makeID(tenant+"-", tenant+"/"+namespace+"/"+name, name)
}

// ResourceID returns the IPAM ID of a MetalLB announcement resource
// (advertisement, peer, BFD profile, community) namespace/name. These
// belong to the tenant already; the "mlb-" prefix marks them as the
// adapter's, so that it never touches resources created by other means.
func ResourceID(namespace, name string) string {
	return makeID(ResourcePrefix, namespace+"/"+name, name)
}

// ResourcePrefix starts the ID of every announcement resource the adapter
// manages.
const ResourcePrefix = "mlb-"

func makeID(prefix, full, name string) string {
	id := prefix + name
	if validID(id) {
		return id
	}
	sum := sha256.Sum256([]byte(full))
	suffix := "-" + hex.EncodeToString(sum[:4])
	clean := prefix + sanitize(name)
	if clean[0] < 'a' || clean[0] > 'z' {
		clean = "p-" + clean
	}
	if len(clean)+len(suffix) > maxID {
		clean = strings.TrimRight(clean[:maxID-len(suffix)], "-")
	}
	return clean + suffix
}

// validID reports whether s is an IPAM ID: 1-63 lower-case letters, digits
// and '-', starting with a letter, not ending with '-'.
func validID(s string) bool {
	if len(s) == 0 || len(s) > maxID || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

func sanitize(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-")
}
