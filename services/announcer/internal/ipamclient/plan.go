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
}

// RouteKey names a route.
type RouteKey struct {
	Prefix netip.Prefix
	Peer   string
}

func newPlan() *Plan {
	return &Plan{Peers: map[string]*ipamv1.PlanPeer{}, Routes: map[RouteKey]*ipamv1.PlanRoute{}, L2: map[netip.Addr][]string{}}
}

// Clone returns a copy that later changes to p do not touch.
func (p *Plan) Clone() *Plan {
	return &Plan{Peers: maps.Clone(p.Peers), Routes: maps.Clone(p.Routes), L2: maps.Clone(p.L2)}
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

func (p *Plan) upsertRoute(r *ipamv1.PlanRoute) {
	if pf, err := netip.ParsePrefix(r.GetPrefix()); err == nil {
		p.Routes[RouteKey{pf, r.GetPeer()}] = r
	}
}

func (p *Plan) upsertL2(l *ipamv1.PlanL2Address) {
	if a, err := netip.ParseAddr(l.GetAddress()); err == nil {
		p.L2[a] = l.GetInterfaces()
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
		if pf, err := netip.ParsePrefix(k.GetPrefix()); err == nil {
			delete(n.Routes, RouteKey{pf, k.GetPeer()})
		}
	}
	for _, r := range c.GetUpsertRoutes() {
		n.upsertRoute(r)
	}
	for _, a := range c.GetRemoveL2Addresses() {
		if addr, err := netip.ParseAddr(a); err == nil {
			delete(n.L2, addr)
		}
	}
	for _, l := range c.GetUpsertL2Addresses() {
		n.upsertL2(l)
	}
	return n
}
