package ipamclient

import (
	"maps"
	"testing"

	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// FuzzPlanChange decodes arbitrary wire bytes as a plan snapshot and a plan
// change from the IPAM and applies them as the announcer does. Nothing
// panics; applying a change leaves the plan it was applied to untouched,
// applying it twice is applying it once, and an empty change changes
// nothing; every route and L2 address in a plan is in the canonical form
// (no host bits, no zone, no IPv4-mapped address), and every such entry an
// applied change upserts is in the result.
func FuzzPlanChange(f *testing.F) {
	f.Fuzz(func(t *testing.T, snap, change []byte) {
		s, c := &ipamv1.Plan{}, &ipamv1.PlanChange{}
		if proto.Unmarshal(snap, s) != nil || proto.Unmarshal(change, c) != nil {
			return
		}
		p := snapshot(s)
		check(t, p)
		before := p.Clone()
		if !p.apply(&ipamv1.PlanChange{}).Equal(p) {
			t.Fatal("an empty change changed the plan")
		}
		n := p.apply(c)
		check(t, n)
		if !p.Equal(before) || !maps.Equal(p.Routes, before.Routes) || !maps.Equal(p.Peers, before.Peers) {
			t.Fatal("apply changed the plan it was applied to")
		}
		if !n.apply(c).Equal(n) {
			t.Fatal("applying a change twice differs from applying it once")
		}
		for _, r := range c.GetUpsertRoutes() {
			if pf, ok := parsePrefix(r.GetPrefix()); ok && n.Routes[RouteKey{pf, r.GetPeer()}] == nil {
				t.Fatalf("upserted route %s to %q missing", pf, r.GetPeer())
			}
		}
		for _, l := range c.GetUpsertL2Addresses() {
			if a, ok := parseAddr(l.GetAddress()); ok {
				if _, in := n.L2[a]; !in {
					t.Fatalf("upserted L2 address %s missing", a)
				}
			}
		}
	})
}

func check(t *testing.T, p *Plan) {
	t.Helper()
	for k := range p.Routes {
		if !k.Prefix.IsValid() || k.Prefix != k.Prefix.Masked() || k.Prefix.Addr().Is4In6() {
			t.Fatalf("route prefix %v is not canonical", k.Prefix)
		}
	}
	for a := range p.L2 {
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			t.Fatalf("L2 address %v is not canonical", a)
		}
	}
}
