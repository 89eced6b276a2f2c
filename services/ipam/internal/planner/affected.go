package planner

import (
	"net/netip"
	"slices"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Affected returns how the plans change when one allocation changes from
// before to after, two versions of one allocation (same tenant and ID;
// before nil: allocated; after nil: released; both set: updated, e.g. its
// endpoint nodes or labels), without recomputing every
// plan: the deltas of the nodes whose plans change, by node name, and the
// new L2 owner of each address before or after holds ("" when no node
// answers for it any more), to merge into the owners map.
//
// in is the rest of the state, unchanged by this allocation: nodes,
// configuration and the other allocations. in.Allocations may hold before,
// after or neither; the entry with the changed allocation's tenant and ID is
// ignored. owners are the current L2 owners, from which Plans computed the
// current plans.
//
// Applying each delta to Plans(in with before, owners) gives Plans(in with
// after, owners updated by the returned owners), and the updated owners equal
// L2Owners(in with after, sticky from owners). Peers never change here.
//
// Cost: compile, O(A) to find the other allocations holding the same
// addresses or aggregated into the same prefixes, and O(N·P) per affected
// prefix and O(N) per address to recompute them on every node.
func Affected(in *Input, before, after *ipam.Allocation, owners map[netip.Addr]string) (map[string]*Delta, map[netip.Addr]string) {
	self := before
	if self == nil {
		self = after
	}
	deltas := map[string]*Delta{}
	if self == nil {
		return deltas, map[netip.Addr]string{}
	}
	c := compile(in)
	var others []*ipam.Allocation
	for _, a := range in.Allocations {
		if a.Tenant != self.Tenant || a.ID != self.ID {
			others = append(others, a)
		}
	}
	get := func(n int) *Delta {
		name := c.nodes[n].Name
		d := deltas[name]
		if d == nil {
			d = &Delta{}
			deltas[name] = d
		}
		return d
	}
	newOwners := c.affectL2(others, before, after, owners, get)
	c.affectRoutes(others, before, after, get)
	for name, d := range deltas {
		if d.Empty() {
			delete(deltas, name)
		}
	}
	return deltas, newOwners
}

// affectL2 records the L2 changes of the addresses before and after hold,
// and returns their new owners.
func (c *compiled) affectL2(others []*ipam.Allocation, before, after *ipam.Allocation, owners map[netip.Addr]string, get func(int) *Delta) map[netip.Addr]string {
	var touched []netip.Addr
	for _, a := range []*ipam.Allocation{before, after} {
		if a != nil {
			touched = append(touched, a.Addrs...)
		}
	}
	touched = withGroups(touched, others)
	newOwners := make(map[netip.Addr]string, len(touched))
	for _, addr := range touched {
		newOwners[addr] = ""
	}
	if len(c.l2) == 0 {
		return newOwners
	}

	shared := map[netip.Addr][]holder{}
	for _, a := range others {
		var ads bitset
		for _, addr := range a.Addrs {
			if _, ok := newOwners[addr]; !ok {
				continue
			}
			if ads == nil {
				ads = c.l2AdsOf(a)
			}
			shared[addr] = append(shared[addr], holder{a, ads})
		}
	}
	entry := func(a *ipam.Allocation, addr netip.Addr) (l2Entry, bool) {
		hs := shared[addr]
		if a != nil && slices.Contains(a.Addrs, addr) {
			hs = append(slices.Clip(hs), holder{a, c.l2AdsOf(a)})
		}
		return c.l2Entry(addr, hs)
	}
	// The slots of an allocation with several addresses are decided
	// together (see spread): all their addresses are touched.
	var entries []l2Entry
	for _, addr := range touched {
		if ea, ok := entry(after, addr); ok {
			entries = append(entries, ea)
		}
	}
	spreadTo := c.spreadGroups(entries, owners)
	for _, addr := range touched {
		nb, na := -1, -1
		eb, okb := entry(before, addr)
		if n, ok := c.nodeIdx[owners[addr]]; okb && ok && c.active[n] {
			nb = n
		}
		ea, oka := entry(after, addr)
		if oka {
			// As in L2Owners: follow the anchor's new owner (decided above
			// when it is touched too, else unchanged).
			sticky := owners[addr]
			if o, touchedToo := newOwners[ea.anchor]; ea.anchor != addr && touchedToo && o != "" {
				sticky = o
			} else if o, ok := owners[ea.anchor]; ea.anchor != addr && !touchedToo && ok {
				sticky = o
			}
			if n, ok := spreadTo[addr]; ok {
				na = n
			} else {
				na = c.decide(&ea, sticky)
			}
		}
		if na >= 0 {
			newOwners[addr] = c.nodes[na].Name
		}
		switch {
		case nb != na:
			if nb >= 0 {
				d := get(nb)
				d.RemoveL2 = append(d.RemoveL2, addr)
			}
			if na >= 0 {
				d := get(na)
				d.UpsertL2 = append(d.UpsertL2, c.planL2(&ea, na))
			}
		case na >= 0:
			if lb, la := c.planL2(&eb, nb), c.planL2(&ea, na); !l2Equal(lb, la) {
				d := get(na)
				d.UpsertL2 = append(d.UpsertL2, la)
			}
		}
	}
	return newOwners
}

// affectRoutes records the route changes of the prefixes before and after
// contribute to, on every node.
func (c *compiled) affectRoutes(others []*ipam.Allocation, before, after *ipam.Allocation, get func(int) *Delta) {
	if len(c.bgp) == 0 || len(c.peers) == 0 {
		return
	}
	pb, pa := map[netip.Prefix]*contrib{}, map[netip.Prefix]*contrib{}
	if before != nil {
		c.addContribs(pb, before, nil)
	}
	if after != nil {
		c.addContribs(pa, after, nil)
	}
	var affected []netip.Prefix
	for p := range pb {
		affected = append(affected, p)
	}
	for p := range pa {
		if _, ok := pb[p]; !ok {
			affected = append(affected, p)
		}
	}
	if len(affected) == 0 {
		return
	}
	slices.SortFunc(affected, cmpPrefix)
	keep := func(p netip.Prefix) bool {
		_, found := slices.BinarySearchFunc(affected, p, cmpPrefix)
		return found
	}

	rest := map[netip.Prefix]*contrib{}
	for _, a := range others {
		if slices.ContainsFunc(a.Addrs, func(addr netip.Addr) bool {
			return slices.ContainsFunc(affected, func(p netip.Prefix) bool { return p.Contains(addr) })
		}) {
			c.addContribs(rest, a, keep)
		}
	}

	for _, p := range affected {
		xb, xa := c.newContrib(), c.newContrib()
		xb.merge(rest[p])
		xb.merge(pb[p])
		xa.merge(rest[p])
		xa.merge(pa[p])
		for n := range c.nodes {
			if !c.active[n] {
				continue
			}
			rb, ra := c.routesFor(n, p, xb), c.routesFor(n, p, xa)
			if len(rb) == 0 && len(ra) == 0 {
				continue
			}
			walk(rb, ra, cmpRoute,
				func(r ipam.PlanRoute) {
					d := get(n)
					d.RemoveRoutes = append(d.RemoveRoutes, r.Key())
				},
				func(r ipam.PlanRoute) {
					d := get(n)
					d.UpsertRoutes = append(d.UpsertRoutes, r)
				},
				routeEqual)
		}
	}
}

// withGroups returns touched, sorted and without repeats, with every
// address of each allocation of others with several addresses per family
// that holds one of them, until there is no more such allocation: their
// slots are decided together (see spread). The allocator never shares
// those addresses, so this adds nothing in practice but keeps Affected
// equal to L2Owners whatever the input. Cost: O(A) per round.
func withGroups(touched []netip.Addr, others []*ipam.Allocation) []netip.Addr {
	slices.SortFunc(touched, netip.Addr.Compare)
	touched = slices.Compact(touched)
	has := func(addr netip.Addr) bool {
		_, found := slices.BinarySearchFunc(touched, addr, netip.Addr.Compare)
		return found
	}
	missing := func(addr netip.Addr) bool { return !has(addr) }
	for {
		var more []netip.Addr
		for _, a := range others {
			if a.Count() > 1 && slices.ContainsFunc(a.Addrs, has) && slices.ContainsFunc(a.Addrs, missing) {
				more = append(more, a.Addrs...)
			}
		}
		if len(more) == 0 {
			return touched
		}
		touched = append(touched, more...)
		slices.SortFunc(touched, netip.Addr.Compare)
		touched = slices.Compact(touched)
	}
}
