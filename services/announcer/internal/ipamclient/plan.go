package ipamclient

import (
	"maps"
	"net/netip"
	"slices"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// Plan is what the node must announce, as last received from the IPAM.
type Plan struct {
	// Peers by name ("tenants/t/bgpPeers/p").
	Peers map[string]*ipamv1.PlanPeer
	// Routes by prefix and peer.
	Routes map[RouteKey]*ipamv1.PlanRoute
	// L2 addresses with the interfaces to answer on (empty: all).
	L2 map[netip.Addr][]string
	// Known are the L2 addresses Beacon was already answering for when
	// the IPAM gave them to this node: they are answered without probing
	// for conflicts first.
	Known map[netip.Addr]bool
}

// RouteKey names a route.
type RouteKey struct {
	Prefix netip.Prefix
	Peer   string
}

func newPlan() *Plan {
	return &Plan{Peers: map[string]*ipamv1.PlanPeer{}, Routes: map[RouteKey]*ipamv1.PlanRoute{}, L2: map[netip.Addr][]string{}, Known: map[netip.Addr]bool{}}
}

// Clone returns a copy that later changes to p do not touch.
func (p *Plan) Clone() *Plan {
	known := maps.Clone(p.Known)
	if known == nil {
		known = map[netip.Addr]bool{}
	}
	return &Plan{Peers: maps.Clone(p.Peers), Routes: maps.Clone(p.Routes), L2: maps.Clone(p.L2), Known: known}
}

// Equal reports whether two plans announce the same things.
func (p *Plan) Equal(o *Plan) bool {
	if len(p.Peers) != len(o.Peers) || len(p.Routes) != len(o.Routes) || len(p.L2) != len(o.L2) {
		return false
	}
	for k, v := range p.L2 {
		w, ok := o.L2[k]
		if !ok || !slices.Equal(v, w) {
			return false
		}
	}
	for k := range p.Routes {
		if _, ok := o.Routes[k]; !ok {
			return false
		}
	}
	for k := range p.Peers {
		if _, ok := o.Peers[k]; !ok {
			return false
		}
	}
	return true
}

// parsePrefix reads a route's prefix as the IPAM writes it: a network
// address without host bits, not an IPv4-mapped IPv6 one. A plan entry
// that is not, like one that does not parse, is left out: announcing
// 192.0.2.1/24 as it stands, or a mapped address as IPv6, would announce
// something the IPAM did not plan.
func parsePrefix(s string) (netip.Prefix, bool) {
	pf, err := netip.ParsePrefix(s)
	return pf, err == nil && pf == pf.Masked() && !pf.Addr().Is4In6()
}

// parseAddr reads an L2 address as the IPAM writes it: no zone, not an
// IPv4-mapped IPv6 address (which would be answered for with NDP instead
// of ARP).
func parseAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	return a, err == nil && a.Zone() == "" && !a.Is4In6()
}

func (p *Plan) upsertRoute(r *ipamv1.PlanRoute) {
	if pf, ok := parsePrefix(r.GetPrefix()); ok {
		p.Routes[RouteKey{pf, r.GetPeer()}] = r
	}
}

func (p *Plan) upsertL2(l *ipamv1.PlanL2Address) {
	if a, ok := parseAddr(l.GetAddress()); ok {
		p.L2[a] = l.GetInterfaces()
		if l.GetKnown() {
			p.Known[a] = true
		} else {
			delete(p.Known, a)
		}
	}
}

// snapshot replaces the plan.
func snapshot(s *ipamv1.Plan) *Plan {
	p := newPlan()
	for _, pp := range s.GetPeers() {
		p.Peers[pp.GetPeer().GetName()] = pp
	}
	for _, r := range s.GetRoutes() {
		p.upsertRoute(r)
	}
	for _, l := range s.GetL2Addresses() {
		p.upsertL2(l)
	}
	return p
}

// apply applies a change to a copy of the plan.
func (p *Plan) apply(c *ipamv1.PlanChange) *Plan {
	n := p.Clone()
	for _, name := range c.GetRemovePeers() {
		delete(n.Peers, name)
	}
	for _, pp := range c.GetUpsertPeers() {
		n.Peers[pp.GetPeer().GetName()] = pp
	}
	for _, k := range c.GetRemoveRoutes() {
		if pf, ok := parsePrefix(k.GetPrefix()); ok {
			delete(n.Routes, RouteKey{pf, k.GetPeer()})
		}
	}
	for _, r := range c.GetUpsertRoutes() {
		n.upsertRoute(r)
	}
	for _, a := range c.GetRemoveL2Addresses() {
		if addr, ok := parseAddr(a); ok {
			delete(n.L2, addr)
			delete(n.Known, addr)
		}
	}
	for _, l := range c.GetUpsertL2Addresses() {
		n.upsertL2(l)
	}
	return n
}
