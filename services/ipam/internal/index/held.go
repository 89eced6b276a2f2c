package index

import (
	"net/netip"

	"github.com/beaconlb/beacon/services/ipam/internal/addrspace"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// heldSet is the held addresses of one pool, per family, as sorted runs:
// the lowest is found in O(1), one is added or removed in O(log n).
type heldSet struct {
	v4, v6 *addrspace.FreeList
}

func newHeldSet() *heldSet {
	v4, _ := addrspace.NewFreeList(true, nil) // no ranges: cannot fail
	v6, _ := addrspace.NewFreeList(false, nil)
	return &heldSet{v4: v4, v6: v6}
}

func (h *heldSet) of(a netip.Addr) *addrspace.FreeList {
	if a.Is4() {
		return h.v4
	}
	return h.v6
}

func (h *heldSet) empty() bool { return h.v4.Fragments() == 0 && h.v6.Fragments() == 0 }

// lowestN returns the n lowest held addresses of family f, or false.
func (h *heldSet) lowestN(f ipam.Family, n int) ([]netip.Addr, bool) {
	if f == ipam.IPv4 {
		return h.v4.LowestN(n)
	}
	return h.v6.LowestN(n)
}
