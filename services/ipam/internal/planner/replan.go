package planner

import (
	"iter"
	"maps"
	"net/netip"
	"slices"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Prepared is one tenant's configuration and nodes compiled once, to plan
// changes of its allocations and L2 owners (Replan, Owners) without
// compiling again: what a stream of allocation changes needs. It must be
// prepared again when anything else in the Input changes (nodes, pools,
// advertisements, peers, BFD profiles, communities). Its caches make it
// unsafe for concurrent use.
type Prepared struct {
	c *compiled
}

// Prepare compiles in; its Allocations and L2Owners are not used. Cost:
// compile (see the package doc).
func Prepare(in *Input) *Prepared {
	cp := *in
	cp.Allocations, cp.L2Owners = nil, nil
	return &Prepared{c: compile(&cp)}
}

// Allocations is a tenant's current allocations, as Replan and Owners read
// them.
type Allocations struct {
	// All yields every allocation, in any order.
	All iter.Seq[*ipam.Allocation]
	// Holding returns the allocations holding addr.
	Holding func(addr netip.Addr) []*ipam.Allocation
}

// Change is what changed since a tenant's plans were computed.
type Change struct {
	// Allocations are the versions of the changed allocations before and
	// after the change (a released one only before, a new one only after),
	// in any order: only their addresses and the prefixes they contribute
	// to are replanned.
	Allocations []*ipam.Allocation
	// Owners are the L2 addresses whose recorded owner changed, with the
	// owner they had when the plans were computed ("": none).
	Owners map[netip.Addr]string
}

// Replan returns how plans, computed by Plans from the same nodes and
// configuration, change when the allocations and L2 owners named in ch
// change: the deltas of the nodes whose plans change, by node name.
// owners(addr) is the current recorded owner of addr ("": none); for the
// addresses not in ch.Owners it must be the owner the plans were computed
// with. Applying each delta gives Plans(in with allocs, owners).
//
// Cost: O(A) to find the allocations aggregated into a changed prefix
// shorter than an address (none without aggregation: then O(1) per
// address through allocs.Holding), O(N·P) per changed prefix, and O(log L)
// per changed L2 address.
func (p *Prepared) Replan(plans map[string]*ipam.NodePlan, allocs Allocations, ch Change, owners func(netip.Addr) string) map[string]*Delta {
	c := p.c
	deltas := map[string]*Delta{}
	get := func(name string) *Delta {
		d := deltas[name]
		if d == nil {
			d = &Delta{}
			deltas[name] = d
		}
		return d
	}
	c.replanL2(plans, allocs, ch, owners, get)
	c.replanRoutes(plans, allocs, ch, get)
	for name, d := range deltas {
		if d.Empty() {
			delete(deltas, name)
			continue
		}
		sortDelta(d)
	}
	return deltas
}

// sortDelta sorts each list of d by its key, as Delta promises.
func sortDelta(d *Delta) {
	slices.SortFunc(d.UpsertRoutes, cmpRoute)
	slices.SortFunc(d.RemoveRoutes, cmpRouteKey)
	slices.SortFunc(d.UpsertL2, func(a, b ipam.PlanL2) int { return a.Addr.Compare(b.Addr) })
	slices.SortFunc(d.RemoveL2, netip.Addr.Compare)
}

// touchedAddrs returns the addresses of ch, sorted, without repeats.
func touchedAddrs(ch Change) []netip.Addr {
	var out []netip.Addr
	for _, a := range ch.Allocations {
		out = append(out, a.Addrs...)
	}
	out = slices.AppendSeq(out, maps.Keys(ch.Owners))
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// entryOf returns the L2 entry of addr among the allocations holding it.
func (c *compiled) entryOf(allocs Allocations, addr netip.Addr) (l2Entry, bool) {
	var hs []holder
	for _, a := range allocs.Holding(addr) {
		hs = append(hs, holder{a, c.l2AdsOf(a)})
	}
	return c.l2Entry(addr, hs)
}

// replanL2 records the L2 changes of the addresses ch touches: each is
// answered for by its recorded owner, when that node is active.
func (c *compiled) replanL2(plans map[string]*ipam.NodePlan, allocs Allocations, ch Change, owners func(netip.Addr) string, get func(string) *Delta) {
	for _, addr := range touchedAddrs(ch) {
		oldNode, moved := ch.Owners[addr]
		if !moved {
			oldNode = owners(addr)
		}
		old, hadOld := findL2(plans[oldNode], addr)
		var next ipam.PlanL2
		newNode, hasNew := "", false
		if len(c.l2) > 0 {
			if e, ok := c.entryOf(allocs, addr); ok {
				if n, known := c.nodeIdx[owners(addr)]; known && c.active[n] && plans[c.nodes[n].Name] != nil {
					newNode, hasNew, next = c.nodes[n].Name, true, c.planL2(&e, n)
				}
			}
		}
		switch {
		case hadOld && (!hasNew || newNode != oldNode):
			d := get(oldNode)
			d.RemoveL2 = append(d.RemoveL2, addr)
			if hasNew {
				get(newNode).UpsertL2 = append(get(newNode).UpsertL2, next)
			}
		case hasNew && (!hadOld || !l2Equal(old, next)):
			get(newNode).UpsertL2 = append(get(newNode).UpsertL2, next)
		}
	}
}

// findL2 returns plan p's entry for addr.
func findL2(p *ipam.NodePlan, addr netip.Addr) (ipam.PlanL2, bool) {
	if p == nil {
		return ipam.PlanL2{}, false
	}
	i, ok := slices.BinarySearchFunc(p.L2, addr, func(l ipam.PlanL2, a netip.Addr) int { return l.Addr.Compare(a) })
	if !ok {
		return ipam.PlanL2{}, false
	}
	return p.L2[i], true
}

// routesOf returns plan p's routes for prefix pfx (read-only).
func routesOf(p *ipam.NodePlan, pfx netip.Prefix) []ipam.PlanRoute {
	if p == nil {
		return nil
	}
	return p.Routes.Prefix(pfx)
}

// replanRoutes records the route changes of the prefixes the versions in ch
// contribute to, on every node that has a plan.
func (c *compiled) replanRoutes(plans map[string]*ipam.NodePlan, allocs Allocations, ch Change, get func(string) *Delta) {
	if len(c.bgp) == 0 || len(c.peers) == 0 || len(ch.Allocations) == 0 {
		return
	}
	vers := map[netip.Prefix]*contrib{}
	for _, a := range ch.Allocations {
		c.addContribs(vers, a, nil)
	}
	if len(vers) == 0 {
		return
	}
	affected := slices.SortedFunc(maps.Keys(vers), cmpPrefix)
	keep := func(p netip.Prefix) bool {
		_, found := slices.BinarySearchFunc(affected, p, cmpPrefix)
		return found
	}
	// The allocations contributing to the affected prefixes now: those
	// holding an affected address (an address's own prefix), and, for a
	// prefix aggregating several addresses, those holding one inside it.
	full := func(p netip.Prefix) bool { return p.Bits() == p.Addr().BitLen() }
	contributors := map[*ipam.Allocation]bool{}
	aggregated := false
	for _, p := range affected {
		if !full(p) {
			aggregated = true
			continue
		}
		for _, a := range allocs.Holding(p.Addr()) {
			contributors[a] = true
		}
	}
	if aggregated {
		inAggregate := func(addr netip.Addr) bool {
			return slices.ContainsFunc(affected, func(p netip.Prefix) bool { return !full(p) && p.Contains(addr) })
		}
		for a := range allocs.All {
			if slices.ContainsFunc(a.Addrs, inAggregate) {
				contributors[a] = true
			}
		}
	}
	cur := map[netip.Prefix]*contrib{}
	for a := range contributors {
		c.addContribs(cur, a, keep)
	}
	for n, node := range c.nodes {
		plan := plans[node.Name]
		if plan == nil {
			continue
		}
		for _, p := range affected {
			rb, ra := routesOf(plan, p), c.routesFor(n, p, cur[p])
			if len(rb) == 0 && len(ra) == 0 {
				continue
			}
			walk(rb, ra, cmpRoute,
				func(r ipam.PlanRoute) {
					d := get(node.Name)
					d.RemoveRoutes = append(d.RemoveRoutes, r.Key())
				},
				func(r ipam.PlanRoute) {
					d := get(node.Name)
					d.UpsertRoutes = append(d.UpsertRoutes, r)
				},
				routeEqual)
		}
	}
}

// Owners returns the L2 owners L2Owners would choose, given the recorded
// owners, for the addresses addrs and every address of the allocations
// with several addresses per family holding one of them (their slots are
// decided together): "" for an address no node answers for. It is
// L2Owners restricted to those addresses when the recorded owners of the
// others are what L2Owners chooses for them. Cost: O(1) per address
// through allocs.Holding, plus the hashing (see L2Owners).
func (p *Prepared) Owners(allocs Allocations, addrs []netip.Addr, recorded func(netip.Addr) (string, bool)) map[netip.Addr]string {
	c := p.c
	touched := slices.Clone(addrs)
	slices.SortFunc(touched, netip.Addr.Compare)
	touched = slices.Compact(touched)
	has := func(addr netip.Addr) bool {
		_, found := slices.BinarySearchFunc(touched, addr, netip.Addr.Compare)
		return found
	}
	for grown := true; grown; {
		grown = false
		for _, addr := range touched {
			for _, a := range allocs.Holding(addr) {
				if a.Count() > 1 && slices.ContainsFunc(a.Addrs, func(x netip.Addr) bool { return !has(x) }) {
					touched = append(touched, a.Addrs...)
					grown = true
				}
			}
		}
		slices.SortFunc(touched, netip.Addr.Compare)
		touched = slices.Compact(touched)
	}
	out := make(map[netip.Addr]string, len(touched))
	for _, addr := range touched {
		out[addr] = ""
	}
	if len(c.l2) == 0 {
		return out
	}
	var entries []l2Entry
	sticky := map[netip.Addr]string{}
	for _, addr := range touched {
		if e, ok := c.entryOf(allocs, addr); ok {
			entries = append(entries, e)
		}
		if o, ok := recorded(addr); ok {
			sticky[addr] = o
		}
	}
	for addr, n := range c.spreadGroups(entries, sticky) {
		if n >= 0 {
			out[addr] = c.nodes[n].Name
		}
	}
	// Entries are in address order: an anchor is decided before the
	// addresses that follow it (as in L2Owners).
	for _, e := range entries {
		if e.group && e.anchor == e.addr {
			continue
		}
		s := sticky[e.addr]
		if e.anchor != e.addr {
			if has(e.anchor) {
				if o := out[e.anchor]; o != "" {
					s = o
				}
			} else if o, ok := recorded(e.anchor); ok {
				s = o
			}
		}
		if n := c.decide(&e, s); n >= 0 {
			out[e.addr] = c.nodes[n].Name
		}
	}
	return out
}

// ApplyAll applies each delta to its node's plan in plans, replacing the
// plan (plans themselves are never modified, see Apply). Nodes whose plans
// shared one Routes list, as Plans makes nodes of one class share it, and
// whose deltas change their routes alike, share the new Routes list too: a
// route change every node sees costs O(R/128 + 128) (ipam.Routes.Patch)
// once per class, not per node, and never a copy of the whole list.
func ApplyAll(plans map[string]*ipam.NodePlan, deltas map[string]*Delta) {
	type shared struct {
		base   ipam.Routes
		d      *Delta
		routes ipam.Routes
	}
	var memo []shared
	for _, name := range slices.Sorted(maps.Keys(deltas)) {
		d := deltas[name]
		old := plans[name]
		if old == nil {
			old = &ipam.NodePlan{}
		}
		routesOnly := &Delta{UpsertRoutes: d.UpsertRoutes, RemoveRoutes: d.RemoveRoutes}
		next := Apply(old, &Delta{UpsertPeers: d.UpsertPeers, RemovePeers: d.RemovePeers, UpsertL2: d.UpsertL2, RemoveL2: d.RemoveL2})
		if len(d.UpsertRoutes)+len(d.RemoveRoutes) > 0 {
			var found ipam.Routes
			ok := false
			for _, m := range memo {
				if m.base.Same(old.Routes) && sameRouteChange(m.d, routesOnly) {
					found, ok = m.routes, true
					break
				}
			}
			if !ok {
				found = old.Routes.Patch(d.UpsertRoutes, d.RemoveRoutes)
				if old.Routes.Len() > 0 {
					memo = append(memo, shared{old.Routes, routesOnly, found})
				}
			}
			next.Routes = found
		}
		plans[name] = next
	}
}

// sameRouteChange reports whether two deltas change routes alike.
func sameRouteChange(a, b *Delta) bool {
	return slices.EqualFunc(a.UpsertRoutes, b.UpsertRoutes, routeEqual) && slices.Equal(a.RemoveRoutes, b.RemoveRoutes)
}
