package planner

import (
	"net/netip"
	"slices"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// slotAnchor returns the address whose owner addr follows in allocation a:
// a's lowest address, or, when a has several addresses per family, the
// lowest address of addr's slot (the k-th lowest address of each family,
// for addr the k-th lowest of its own). It does not depend on the order of
// a.Addrs. Cost: O(|a.Addrs| log |a.Addrs|).
func slotAnchor(a *ipam.Allocation, addr netip.Addr) netip.Addr {
	if a.Count() <= 1 {
		return slices.MinFunc(a.Addrs, netip.Addr.Compare)
	}
	k := 0 // addr's rank in its family
	var other []netip.Addr
	for _, o := range a.Addrs {
		switch {
		case o.Is4() != addr.Is4():
			other = append(other, o)
		case o.Less(addr):
			k++
		}
	}
	if k >= len(other) {
		return addr
	}
	slices.SortFunc(other, netip.Addr.Compare)
	if other[k].Less(addr) {
		return other[k]
	}
	return addr
}

// spreadGroups decides the slot anchors of every allocation with several
// addresses per family among entries (in address order; see spread), given
// the sticky owners: the owner of each (-1: none). Each allocation's
// anchors must all be among entries.
func (c *compiled) spreadGroups(entries []l2Entry, sticky map[netip.Addr]string) map[netip.Addr]int {
	groups := map[string][]*l2Entry{}
	for i := range entries {
		if e := &entries[i]; e.group && e.anchor == e.addr {
			groups[e.alloc] = append(groups[e.alloc], e)
		}
	}
	out := map[netip.Addr]int{}
	for _, es := range groups {
		for i, n := range c.spread(es, sticky) {
			out[es[i].addr] = n
		}
	}
	return out
}

// spread returns the owner (-1: none) of each slot anchor of one
// allocation, es in address order, given the sticky owners.
//
// Every slot of an allocation has the same candidates (one holder: the
// same advertisements and endpoints), k of them for n slots. A node may
// own at most ceil(n/k) slots. First each slot, in address order, keeps
// its sticky owner while it is a candidate under that cap; then each slot
// left takes, in address order, the candidate with the fewest slots so far,
// rendezvous hashing of the slot's anchor breaking ties. So with k >= n
// the slots have distinct owners; a node leaving moves only its slots; a
// node returning takes only slots beyond the cap (those sharing a node);
// and the result passed back as the sticky owners is kept (no node ends
// above the cap). Cost: O(n·k).
func (c *compiled) spread(es []*l2Entry, sticky map[netip.Addr]string) []int {
	out := make([]int, len(es))
	cands := make([][]int, len(es))
	slots := 0
	for i, e := range es {
		out[i] = -1
		if cands[i] = c.candidates(e); len(cands[i]) > 0 {
			slots++
		}
	}
	used := make(map[int]int)
	for i, e := range es {
		cs := cands[i]
		if len(cs) == 0 {
			continue
		}
		capacity := (slots + len(cs) - 1) / len(cs)
		n, ok := c.nodeIdx[sticky[e.addr]]
		if !ok || used[n] >= capacity {
			continue
		}
		if _, found := slices.BinarySearch(cs, n); found {
			out[i] = n
			used[n]++
		}
	}
	var least []int
	for i, e := range es {
		if out[i] >= 0 || len(cands[i]) == 0 {
			continue
		}
		least = least[:0]
		for _, n := range cands[i] {
			switch {
			case len(least) == 0 || used[n] < used[least[0]]:
				least = append(least[:0], n)
			case used[n] == used[least[0]]:
				least = append(least, n)
			}
		}
		out[i] = rendezvous(e.anchor, least, c.nodeKeys)
		used[out[i]]++
	}
	return out
}
