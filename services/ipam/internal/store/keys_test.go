package store

import (
	"testing"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// An IPv4 address in its IPv4-mapped IPv6 form is the same address: its
// claim has the same key, or it could be claimed twice.
func TestClaimKeyOfMappedAddress(t *testing.T) {
	v4 := key(ipam.Ref{Kind: ipam.KindClaim, ID: "192.0.2.1"})
	if got := key(ipam.Ref{Kind: ipam.KindClaim, ID: "::ffff:192.0.2.1"}); got != v4 {
		t.Errorf("claim key of ::ffff:192.0.2.1 = %q, want %q (192.0.2.1's)", got, v4)
	}
}
