package planner

import (
	"net/netip"
	"slices"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Plans returns the plan of every live node (draining ones included), by
// node name, given the L2 owners decided by L2Owners (or kept up to date
// with Affected). Non-live nodes have no plan.
//
//   - Peers: every peer whose node selectors select the node, with its BFD
//     profile (nil when it names none or an unknown one), sorted by peer ID,
//     whether or not any route goes to it.
//   - Routes: for each allocated address and each BGP advertisement
//     selecting it, the address masked to the aggregation length (see
//     prefix, and the pool's own prefix around it) is announced by every live, non-draining node the
//     advertisement's node selectors select (only endpoint nodes for LOCAL
//     traffic policy) to every peer of the advertisement (all the tenant's
//     when it names none) that selects the node. Routes with the same
//     prefix and peer merge: their communities unite, and the lowest
//     non-zero local preference wins (iBGP peers only; Check reports the
//     conflict). Sorted by prefix, then peer ID.
//   - L2: every address owners[addr] names a live, non-draining node for,
//     with the interfaces of the advertisements selecting both the address
//     and the node (nil, every interface, when one of them names none),
//     sorted by address. An address several allocations share names the
//     first of them ("tenant/id").
//
// Plans are read-only: nodes that see the same routes share one Routes
// list (ipam.Routes, immutable), and routes share their community slices. Cost: compile, O(A·(L+B)) selector evaluations,
// O(A log A) sorting, O(K·R) for K classes of nodes with the same node
// selector matches and R routes per class, and O(A) for L2. A node that is
// an endpoint of a LOCAL allocation announced over BGP cannot share its
// class's Routes list and gets its own copy: O(R) more for each such node,
// which dominates when LOCAL allocations are spread over many nodes.
func Plans(in *Input, owners map[netip.Addr]string) map[string]*ipam.NodePlan {
	c := compile(in)
	return c.plans(owners, func(int) bool { return true })
}

// Plan returns the plan of one node, as Plans would, or nil when the node is
// unknown or not live: what a Subscribe snapshot needs, without planning
// every node. Cost: compile, O(A·(L+B)) selector evaluations, O(A log A)
// sorting, and the node's own routes.
func Plan(in *Input, owners map[netip.Addr]string, node string) *ipam.NodePlan {
	c := compile(in)
	want, ok := c.nodeIdx[node]
	if !ok {
		return nil
	}
	return c.plans(owners, func(n int) bool { return n == want })[node]
}

// plans returns the plans of the live nodes for which want holds.
func (c *compiled) plans(owners map[netip.Addr]string, want func(n int) bool) map[string]*ipam.NodePlan {
	plans := make(map[string]*ipam.NodePlan, len(c.nodes))
	for n, node := range c.nodes {
		if node.Live && want(n) {
			plans[node.Name] = &ipam.NodePlan{Peers: c.planPeers(n)}
		}
	}
	if len(plans) == 0 {
		return plans
	}
	c.planRoutes(plans, want)
	for _, e := range c.l2Entries(c.in.Allocations) {
		n, ok := c.nodeIdx[owners[e.addr]]
		if !ok || !c.active[n] || !want(n) {
			continue
		}
		p := plans[c.nodes[n].Name]
		p.L2 = append(p.L2, c.planL2(&e, n))
	}
	return plans
}

// planPeers returns node n's BGP sessions.
func (c *compiled) planPeers(n int) []ipam.PlanPeer {
	var out []ipam.PlanPeer
	for _, p := range c.peers {
		if p.match[n] {
			out = append(out, ipam.PlanPeer{Peer: p.p, BFD: p.bfd})
		}
	}
	return out
}

// nodeClass is a set of active nodes that the same BGP advertisements and
// peers select: for contributions from CLUSTER allocations, they announce the
// same routes.
type nodeClass struct {
	rep    int    // a member
	ads    bitset // the BGP advertisements selecting the members
	routes []ipam.PlanRoute
	tmpl   map[string][]ipam.PlanRoute // by cluster advertisements' key
}

// override is one prefix's routes on one node, computed for that node
// because LOCAL contributions make them differ from its class's.
type override struct {
	prefix netip.Prefix
	routes []ipam.PlanRoute
}

// planRoutes fills in the Routes of plans, those of the nodes for which
// want holds.
func (c *compiled) planRoutes(plans map[string]*ipam.NodePlan, want func(n int) bool) {
	if len(c.bgp) == 0 || len(c.peers) == 0 {
		return
	}
	acc := map[netip.Prefix]*contrib{}
	for _, a := range c.in.Allocations {
		c.addContribs(acc, a, nil)
	}
	prefixes := make([]netip.Prefix, 0, len(acc))
	for p := range acc {
		prefixes = append(prefixes, p)
	}
	slices.SortFunc(prefixes, cmpPrefix)

	classOf := make([]int, len(c.nodes))
	var classes []*nodeClass
	byKey := map[string]int{}
	for n := range c.nodes {
		classOf[n] = -1
		if !c.active[n] || !want(n) {
			continue
		}
		ads, peers := newBitset(len(c.bgp)), newBitset(len(c.peers))
		for i, ad := range c.bgp {
			if ad.match[n] {
				ads.set(i)
			}
		}
		for i, p := range c.peers {
			if p.match[n] {
				peers.set(i)
			}
		}
		k := ads.key() + peers.key()
		ci, ok := byKey[k]
		if !ok {
			ci = len(classes)
			byKey[k] = ci
			classes = append(classes, &nodeClass{rep: n, ads: ads, tmpl: map[string][]ipam.PlanRoute{}})
		}
		classOf[n] = ci
	}

	overrides := map[int][]override{}
	for _, p := range prefixes {
		x := acc[p]
		if !x.cluster.empty() {
			// Templates depend on the family too: peers carry one.
			k := x.cluster.key()
			if p.Addr().Is6() {
				k = "6" + k
			}
			if x.isBackup() {
				k = "b" + k
			}
			for _, cl := range classes {
				t, ok := cl.tmpl[k]
				if !ok {
					t = c.routesVia(cl.rep, p, x.cluster.and(cl.ads), x.isBackup(), nil)
					cl.tmpl[k] = t
				}
				for _, r := range t {
					r.Prefix = p
					cl.routes = append(cl.routes, r)
				}
			}
		}
		if len(x.locals) == 0 {
			continue
		}
		var nodes []int
		for _, l := range x.locals {
			nodes = append(nodes, l.endpoints...)
		}
		slices.Sort(nodes)
		for _, n := range slices.Compact(nodes) {
			if c.active[n] && want(n) {
				overrides[n] = append(overrides[n], override{p, c.routesFor(n, p, x)})
			}
		}
	}

	shared := make([]ipam.Routes, len(classes))
	for i, cl := range classes {
		shared[i] = ipam.RoutesOf(cl.routes)
	}
	for n, node := range c.nodes {
		if classOf[n] < 0 {
			continue
		}
		if ovs := overrides[n]; len(ovs) > 0 {
			plans[node.Name].Routes = ipam.RoutesOf(mergeOverrides(classes[classOf[n]].routes, ovs))
		} else {
			plans[node.Name].Routes = shared[classOf[n]]
		}
	}
}

// mergeOverrides returns base, sorted by route key, with the routes of each
// overridden prefix replaced by the override's, in a new slice.
func mergeOverrides(base []ipam.PlanRoute, ovs []override) []ipam.PlanRoute {
	out := make([]ipam.PlanRoute, 0, len(base)+len(ovs))
	i := 0
	for _, ov := range ovs {
		for i < len(base) && cmpPrefix(base[i].Prefix, ov.prefix) < 0 {
			out = append(out, base[i])
			i++
		}
		for i < len(base) && base[i].Prefix == ov.prefix {
			i++
		}
		out = append(out, ov.routes...)
	}
	out = append(out, base[i:]...)
	if len(out) == 0 {
		return nil
	}
	return out
}
