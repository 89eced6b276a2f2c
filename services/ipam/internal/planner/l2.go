package planner

import (
	"net/netip"
	"slices"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// L2Owners decides which node answers ARP/NDP for each allocated address
// that at least one L2 advertisement selects; addresses no eligible node can
// answer for are absent.
//
// A node is eligible for an address when it is live and not draining, and
// for at least one advertisement selecting the address it matches the node
// selectors and has an Up interface among the advertisement's interfaces
// (any Up interface when none are named). A node's tier is the lowest
// Priority among the node priorities it matches in those advertisements
// (the last tier when it matches none), and only the lowest tier with an
// eligible node may own the address. When the allocation's traffic policy is
// LOCAL, only its endpoint nodes are eligible. Several allocations sharing an
// address: the advertisements selecting any of them all apply, and every
// LOCAL one's endpoint nodes restrict the choice.
//
// Ownership is sticky: the owner in in.L2Owners keeps the address while it
// is eligible and in the best tier, so a node joining never moves an
// address. Otherwise the owner is chosen among the best tier by rendezvous
// hashing of the address and node name: every replica computes the same
// owner, and a node leaving moves only its own addresses.
//
// The addresses of a dual-stack allocation are answered for by one node, as
// MetalLB does: the IPv6 address follows its IPv4 address (the allocation's
// anchor), taking the anchor's owner when that node is eligible for it, and
// hashing the anchor, not itself, otherwise. With several holders, the
// first holder's addresses decide.
//
// An allocation with several addresses per family (active-active L2,
// ipam.Allocation.AddressCount) has one slot per address of a family: its
// k-th lowest address of each family, the IPv6 one following the IPv4 one
// as above. Its slots are spread over distinct nodes of the best tier, as
// many as there are, else as evenly as possible; each slot keeps its sticky
// owner unless that owner already has its share of the allocation's slots,
// so a node leaving moves only its own slots, and a node returning takes
// only slots that share a node (see spread). This holds for the addresses
// the allocation holds alone, which are all of them: the allocator never
// shares them.
//
// L2Owners is idempotent: passing its result back as in.L2Owners returns the
// same map. Cost: compile (see the package doc), O(A·L) selector evaluations
// for the allocations, and O(A·T) hash evaluations, T being the number of
// nodes in an address's best tier (at most N).
func L2Owners(in *Input) map[netip.Addr]string {
	c := compile(in)
	entries := c.l2Entries(in.Allocations)
	owners := make(map[netip.Addr]string, len(entries))
	// The slots of allocations with several addresses are decided
	// together, spread over distinct nodes (see spread).
	for addr, n := range c.spreadGroups(entries, in.L2Owners) {
		if n >= 0 {
			owners[addr] = c.nodes[n].Name
		}
	}
	for _, e := range entries {
		if e.group && e.anchor == e.addr {
			continue // decided by spreadGroups
		}
		// Entries are in address order: an anchor is decided before the
		// addresses that follow it.
		sticky := in.L2Owners[e.addr]
		if o, ok := owners[e.anchor]; ok && e.anchor != e.addr {
			sticky = o
		}
		if o := c.decide(&e, sticky); o >= 0 {
			owners[e.addr] = c.nodes[o].Name
		}
	}
	return owners
}

// holder is an allocation holding an address, with the L2 advertisements
// that select it.
type holder struct {
	a   *ipam.Allocation
	ads bitset
}

// l2Entry is one address to answer for over L2.
type l2Entry struct {
	addr netip.Addr
	// ads are the L2 advertisements selecting any of the holders.
	ads bitset
	// local is set when some holder's traffic policy is LOCAL; endpoints
	// are then the nodes every such holder has endpoints on, sorted.
	local     bool
	endpoints []int
	// alloc names the first holder (lowest "tenant/id").
	alloc string
	// anchor is the lowest address of the first holder (of its slot, for
	// an allocation with several addresses per family): addr itself, or
	// the IPv4 address of a dual-stack allocation, whose owner the IPv6
	// one follows (see L2Owners).
	anchor netip.Addr
	// group is set when the only holder has several addresses per family:
	// the anchors of its slots are then spread together (see spread).
	group bool
}

// l2Entries returns the L2 entries of allocs, sorted by address. Cost:
// O(A·L) selector evaluations plus O(A log A) sorting.
func (c *compiled) l2Entries(allocs []*ipam.Allocation) []l2Entry {
	if len(c.l2) == 0 {
		return nil
	}
	byAddr := make(map[netip.Addr][]holder)
	for _, a := range allocs {
		ads := c.l2AdsOf(a)
		if ads.empty() {
			continue
		}
		for _, addr := range a.Addrs {
			byAddr[addr] = append(byAddr[addr], holder{a, ads})
		}
	}
	entries := make([]l2Entry, 0, len(byAddr))
	for addr, hs := range byAddr {
		if e, ok := c.l2Entry(addr, hs); ok {
			entries = append(entries, e)
		}
	}
	slices.SortFunc(entries, func(x, y l2Entry) int { return x.addr.Compare(y.addr) })
	return entries
}

// l2Entry combines the holders of addr; ok is false when no L2
// advertisement selects any of them.
func (c *compiled) l2Entry(addr netip.Addr, hs []holder) (e l2Entry, ok bool) {
	e = l2Entry{addr: addr, ads: newBitset(len(c.l2))}
	holders := 0
	for _, h := range hs {
		if h.ads.empty() {
			continue
		}
		ok = true
		holders++
		e.ads.or(h.ads)
		if name := allocName(h.a); e.alloc == "" || name < e.alloc {
			e.alloc, e.anchor = name, slotAnchor(h.a, addr)
			e.group = h.a.Count() > 1
		}
		if h.a.TrafficPolicy != ipam.TrafficLocal {
			continue
		}
		eps := c.endpoints(h.a)
		if !e.local {
			e.local, e.endpoints = true, eps
			continue
		}
		e.endpoints = slices.DeleteFunc(e.endpoints, func(n int) bool {
			_, found := slices.BinarySearch(eps, n)
			return !found
		})
	}
	e.group = e.group && holders == 1
	return e, ok
}

// tierSet is, for one set of L2 advertisements, every node's eligibility and
// tier.
type tierSet struct {
	ok   []bool
	tier []int
	// best are the eligible nodes of the lowest tier, in name order, and
	// bestTier is that tier.
	best     []int
	bestTier int
}

// tiers returns the tierSet of a set of L2 advertisements, cached. Cost:
// O(N·|ads|) the first time.
func (c *compiled) tiers(ads bitset) *tierSet {
	k := ads.key()
	if ts, ok := c.tierCache[k]; ok {
		return ts
	}
	ts := &tierSet{ok: make([]bool, len(c.nodes)), tier: make([]int, len(c.nodes)), bestTier: noTier}
	for n := range c.nodes {
		ts.tier[n] = noTier
	}
	ads.each(func(i int) {
		ad := c.l2[i]
		for n := range c.nodes {
			if ad.usable[n] {
				ts.ok[n] = true
				ts.tier[n] = min(ts.tier[n], ad.tier[n])
			}
		}
	})
	for n := range c.nodes {
		switch {
		case !ts.ok[n] || ts.tier[n] > ts.bestTier:
		case ts.tier[n] < ts.bestTier || len(ts.best) == 0:
			ts.best, ts.bestTier = append(ts.best[:0], n), ts.tier[n]
		default:
			ts.best = append(ts.best, n)
		}
	}
	c.tierCache[k] = ts
	return ts
}

// decide returns the index of the node that owns e, or -1 when no node is
// eligible; sticky is the current owner's name. Cost: O(T) for T candidates.
func (c *compiled) decide(e *l2Entry, sticky string) int {
	cands := c.candidates(e)
	if len(cands) == 0 {
		return -1
	}
	if n, ok := c.nodeIdx[sticky]; ok {
		if _, found := slices.BinarySearch(cands, n); found {
			return n
		}
	}
	return rendezvous(e.anchor, cands, c.nodeKeys)
}

// candidates returns the nodes that may own e: the eligible nodes of its
// best tier (among its endpoint nodes when it is LOCAL), in index order.
func (c *compiled) candidates(e *l2Entry) []int {
	ts := c.tiers(e.ads)
	cands := ts.best
	if e.local {
		cands = nil
		bestTier := noTier
		for _, n := range e.endpoints {
			switch {
			case !ts.ok[n] || ts.tier[n] > bestTier:
			case ts.tier[n] < bestTier || len(cands) == 0:
				cands, bestTier = append(cands[:0], n), ts.tier[n]
			default:
				cands = append(cands, n)
			}
		}
	}
	return cands
}

// rendezvous returns the candidate with the highest weight for addr; on a
// tie (a 64-bit collision), the first in name order. cands are node indexes
// in name order.
func rendezvous(addr netip.Addr, cands []int, keys []uint64) int {
	ak := addrKey(addr)
	best, bw := -1, uint64(0)
	for _, n := range cands {
		if w := weight(ak, keys[n]); best < 0 || w > bw {
			best, bw = n, w
		}
	}
	return best
}

// planL2 returns the PlanL2 that node n answers for e with: the interfaces
// of the advertisements selecting e whose node selectors select n (all,
// nil, when any of them names none).
func (c *compiled) planL2(e *l2Entry, n int) ipam.PlanL2 {
	var ifaces []string
	all, shared := false, 0
	e.ads.each(func(i int) {
		ad := c.l2[i]
		if !ad.match[n] || all {
			return
		}
		if ad.ifaces == nil {
			all, ifaces = true, nil
			return
		}
		if shared++; shared == 1 {
			ifaces = ad.ifaces
			return
		}
		ifaces = append(slices.Clone(ifaces), ad.ifaces...)
	})
	if shared > 1 && !all {
		slices.Sort(ifaces)
		ifaces = slices.Clip(slices.Compact(ifaces))
	}
	return ipam.PlanL2{Addr: e.addr, Interfaces: ifaces, Allocation: e.alloc}
}
