package planner

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// bgpInput: n1 and n3 in rack a (n3 draining), n2 in rack b, n4 dead; iBGP
// peer r1 for rack a with BFD, eBGP peer r2 for every node; one BGP
// advertisement of every pool; one allocation of 192.0.2.1.
func bgpInput(t *testing.T) *Input {
	n3 := node("n3", "rack", "a")
	n3.Draining = true
	n4 := node("n4", "rack", "b")
	n4.Live = false
	return &Input{
		Pools: pools(
			pool(t, "web", []string{"192.0.2.0/24"}, "tier", "front"),
			pool(t, "v6", []string{"2001:db8::/64"}),
			pool(t, "rng", []string{"198.51.100.10-198.51.100.20"}),
		),
		Allocations: []*ipam.Allocation{alloc("a1", "web", "192.0.2.1")},
		BGP:         []*ipam.BGPAdvertisement{{Tenant: tenant, ID: "adv"}},
		Peers: []*ipam.BGPPeer{
			{Tenant: tenant, ID: "r1", MyASN: 64500, PeerASN: 64500, PeerAddress: addr("10.0.0.1"),
				NodeSelectors: sels("rack", "a"), BFDProfile: "fast"},
			{Tenant: tenant, ID: "r2", MyASN: 64500, PeerASN: 65000, PeerAddress: addr("10.0.0.2")},
		},
		BFD:         map[string]*ipam.BFDProfile{"fast": {Tenant: tenant, ID: "fast", DetectMultiplier: 3}},
		Communities: []*ipam.Community{{Tenant: tenant, ID: "c", Aliases: []ipam.CommunityAlias{{Name: "no-export", Value: "65535:65281"}}}},
		Nodes:       []*ipam.Node{node("n1", "rack", "a"), node("n2", "rack", "b"), n3, n4},
	}
}

// peer6 is an eBGP peer r6 at an IPv6 address, for every node.
func peer6() *ipam.BGPPeer {
	return &ipam.BGPPeer{Tenant: tenant, ID: "r6", MyASN: 64500, PeerASN: 65000, PeerAddress: addr("2001:db8:ff::6")}
}

// rt is a route without attributes.
func rt(prefix, peer string) ipam.PlanRoute { return ipam.PlanRoute{Prefix: pfx(prefix), Peer: peer} }

// backupRoute is r as a global group's backup member announces it to an
// eBGP peer (ibgp: to an iBGP peer, which gets no AS path prepend).
func backupRoute(r ipam.PlanRoute, ibgp ...bool) ipam.PlanRoute {
	r.MED, r.ASPathPrepend = ipam.BackupMED, ipam.BackupASPathPrepend
	if len(ibgp) > 0 && ibgp[0] {
		r.ASPathPrepend = 0
	}
	return r
}

// rtc is a route with attributes.
func rtc(prefix, peer string, lp uint32, comms []uint32, large ...[3]uint32) ipam.PlanRoute {
	return ipam.PlanRoute{Prefix: pfx(prefix), Peer: peer, LocalPref: lp, Communities: comms, LargeCommunities: large}
}

func TestPlansRoutes(t *testing.T) {
	tests := []struct {
		name   string
		change func(in *Input)
		want   map[string][]ipam.PlanRoute // by live node; n3 (draining) never has routes
	}{
		{"every node to every peer that selects it", func(in *Input) {}, map[string][]ipam.PlanRoute{
			"n1": {rt("192.0.2.1/32", "r1"), rt("192.0.2.1/32", "r2")},
			"n2": {rt("192.0.2.1/32", "r2")},
		}},
		{"advertisement node selectors", func(in *Input) { in.BGP[0].NodeSelectors = sels("rack", "b") }, map[string][]ipam.PlanRoute{
			"n2": {rt("192.0.2.1/32", "r2")},
		}},
		{"advertisement peers", func(in *Input) { in.BGP[0].Peers = []string{"r1", "gone"} }, map[string][]ipam.PlanRoute{
			"n1": {rt("192.0.2.1/32", "r1")},
		}},
		{"pool not selected", func(in *Input) { in.BGP[0].PoolSelectors = sels("tier", "back") }, nil},
		{"owner not selected", func(in *Input) { in.BGP[0].OwnerSelectors = sels("app", "x") }, nil},
		{"aggregation dedupes", func(in *Input) {
			in.BGP[0].AggregationLength = 24
			in.BGP[0].Peers = []string{"r2"}
			in.Allocations = append(in.Allocations, alloc("a2", "web", "192.0.2.200"))
		}, map[string][]ipam.PlanRoute{
			"n1": {rt("192.0.2.0/24", "r2")},
			"n2": {rt("192.0.2.0/24", "r2")},
		}},
		{"aggregation never wider than the pool", func(in *Input) {
			in.BGP[0].AggregationLength = 16
			in.BGP[0].Peers = []string{"r2"}
		}, map[string][]ipam.PlanRoute{
			"n1": {rt("192.0.2.0/24", "r2")},
			"n2": {rt("192.0.2.0/24", "r2")},
		}},
		{"aggregation within a range pool", func(in *Input) {
			in.BGP[0].AggregationLength = 24
			in.BGP[0].NodeSelectors = sels("rack", "b")
			// 198.51.100.10-20 is .10/31, .12/30, .16/30, .20/32.
			in.Allocations = []*ipam.Allocation{alloc("a1", "rng", "198.51.100.13"), alloc("a2", "rng", "198.51.100.20")}
		}, map[string][]ipam.PlanRoute{
			"n2": {rt("198.51.100.12/30", "r2"), rt("198.51.100.20/32", "r2")},
		}},
		{"unknown pool: host routes", func(in *Input) {
			in.BGP[0].AggregationLength = 24
			in.BGP[0].NodeSelectors = sels("rack", "b")
			in.Allocations[0].Pool = "gone"
		}, map[string][]ipam.PlanRoute{
			"n2": {rt("192.0.2.1/32", "r2")},
		}},
		{"IPv6 aggregation", func(in *Input) {
			in.BGP[0].AggregationLength = 24
			in.BGP[0].AggregationLengthV6 = 64
			in.BGP[0].NodeSelectors = sels("rack", "b")
			in.Allocations = append(in.Allocations, alloc("a6", "v6", "2001:db8::5"))
			in.Peers = append(in.Peers, peer6())
		}, map[string][]ipam.PlanRoute{
			"n2": {rt("192.0.2.0/24", "r2"), rt("2001:db8::/64", "r6")},
		}},
		{"communities: literals, aliases, large, union of advertisements", func(in *Input) {
			in.BGP[0].Communities = []string{"64500:2", "no-export", "64500:1", "bogus", "large:1:2:3"}
			in.BGP[0].NodeSelectors = sels("rack", "b")
			in.BGP = append(in.BGP, &ipam.BGPAdvertisement{Tenant: tenant, ID: "adv2", Peers: []string{"r2"},
				Communities: []string{"64500:1", "64500:3", "large:1:2:0"}})
		}, map[string][]ipam.PlanRoute{
			"n1": {rtc("192.0.2.1/32", "r2", 0, []uint32{64500<<16 | 1, 64500<<16 | 3}, [3]uint32{1, 2, 0})},
			"n2": {rtc("192.0.2.1/32", "r2", 0, []uint32{64500<<16 | 1, 64500<<16 | 2, 64500<<16 | 3, 65535<<16 | 65281},
				[3]uint32{1, 2, 0}, [3]uint32{1, 2, 3})},
		}},
		{"local preference: lowest wins, iBGP only", func(in *Input) {
			in.BGP[0].LocalPref = 200
			in.BGP = append(in.BGP, &ipam.BGPAdvertisement{Tenant: tenant, ID: "adv2", LocalPref: 100},
				&ipam.BGPAdvertisement{Tenant: tenant, ID: "adv3"})
		}, map[string][]ipam.PlanRoute{
			"n1": {rtc("192.0.2.1/32", "r1", 100, nil), rt("192.0.2.1/32", "r2")},
			"n2": {rt("192.0.2.1/32", "r2")},
		}},
		{"local policy: endpoint nodes only", func(in *Input) { local(in.Allocations[0], "n2", "n3") }, map[string][]ipam.PlanRoute{
			"n2": {rt("192.0.2.1/32", "r2")},
		}},
		{"local and cluster aggregated together", func(in *Input) {
			in.BGP[0].AggregationLength = 24
			in.BGP[0].Peers = []string{"r2"}
			in.BGP[0].Communities = []string{"1:1"}
			in.BGP[0].OwnerSelectors = sels("app", "web")
			in.BGP = append(in.BGP, &ipam.BGPAdvertisement{Tenant: tenant, ID: "adv2", AggregationLength: 24,
				Peers: []string{"r2", "r6"}, Communities: []string{"2:2"}, NodeSelectors: sels("rack", "a")})
			in.Peers = append(in.Peers, peer6())
			in.Allocations[0].OwnerLabels = selector.SetOf(labels("app", "web"))
			in.Allocations = append(in.Allocations,
				local(alloc("a2", "web", "192.0.2.2"), "n2"),
				alloc("a3", "v6", "2001:db8::3"))
		}, map[string][]ipam.PlanRoute{
			"n1": {rtc("192.0.2.0/24", "r2", 0, []uint32{1<<16 | 1, 2<<16 | 2}), rtc("2001:db8::3/128", "r6", 0, []uint32{2<<16 | 2})},
			"n2": {rtc("192.0.2.0/24", "r2", 0, []uint32{1<<16 | 1})},
		}},
		{"no peers", func(in *Input) { in.Peers = nil }, nil},
		{"global member with ready endpoints: every node (cluster policy)", func(in *Input) {
			in.Allocations[0].GlobalGroup, in.Allocations[0].EndpointNodes = "web/g", []string{"elsewhere"}
		}, map[string][]ipam.PlanRoute{
			"n1": {rt("192.0.2.1/32", "r1"), rt("192.0.2.1/32", "r2")},
			"n2": {rt("192.0.2.1/32", "r2")},
		}},
		{"global member without ready endpoints withdraws (cluster policy)", func(in *Input) {
			in.Allocations[0].GlobalGroup = "web/g"
		}, nil},
		{"global member without ready endpoints withdraws (local policy)", func(in *Input) {
			local(in.Allocations[0])
			in.Allocations[0].GlobalGroup = "web/g"
		}, nil},
		{"global member, local policy: endpoint nodes only", func(in *Input) {
			local(in.Allocations[0], "n2")
			in.Allocations[0].GlobalGroup = "web/g"
		}, map[string][]ipam.PlanRoute{
			"n2": {rt("192.0.2.1/32", "r2")},
		}},
		{"global backup member: MED, AS path prepend, half the local preference on iBGP", func(in *Input) {
			in.BGP[0].LocalPref = 200
			in.Allocations[0].GlobalGroup, in.Allocations[0].GlobalBackup, in.Allocations[0].EndpointNodes = "web/g", true, []string{"n1"}
		}, map[string][]ipam.PlanRoute{
			"n1": {backupRoute(rtc("192.0.2.1/32", "r1", 100, nil), true), backupRoute(rt("192.0.2.1/32", "r2"))},
			"n2": {backupRoute(rt("192.0.2.1/32", "r2"))},
		}},
		{"a prefix an active allocation shares with a backup member is not demoted", func(in *Input) {
			in.BGP[0].AggregationLength = 24
			in.BGP[0].Peers = []string{"r2"}
			b := alloc("a2", "web", "192.0.2.2")
			b.GlobalGroup, b.GlobalBackup, b.EndpointNodes = "web/g", true, []string{"n1"}
			in.Allocations = append(in.Allocations, b)
		}, map[string][]ipam.PlanRoute{
			"n1": {rt("192.0.2.0/24", "r2")},
			"n2": {rt("192.0.2.0/24", "r2")},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := bgpInput(t)
			tt.change(in)
			plans := Plans(in, nil)
			got := map[string][]ipam.PlanRoute{}
			for name, p := range plans {
				if p.Routes.Len() > 0 {
					got[name] = p.Routes.Slice()
				}
			}
			if tt.want == nil {
				tt.want = map[string][]ipam.PlanRoute{}
			}
			if diff := cmp.Diff(tt.want, got, planOpts()); diff != "" {
				t.Errorf("routes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(refRoutes(in), got, planOpts()); diff != "" {
				t.Errorf("routes differ from the reference (-ref +got):\n%s", diff)
			}
		})
	}
}

func TestPlansPeersAndNodes(t *testing.T) {
	in := bgpInput(t)
	in.Peers = append(in.Peers, &ipam.BGPPeer{Tenant: tenant, ID: "r0", MyASN: 1, PeerASN: 2, BFDProfile: "gone",
		NodeSelectors: sels("rack", "b")})
	plans := Plans(in, nil)
	if _, ok := plans["n4"]; ok {
		t.Error("a dead node has a plan")
	}
	peers := map[string][]string{}
	for name, p := range plans {
		for _, pp := range p.Peers {
			bfd := "-"
			if pp.BFD != nil {
				bfd = pp.BFD.ID
			}
			peers[name] = append(peers[name], pp.Peer.ID+"/"+bfd)
		}
	}
	want := map[string][]string{
		"n1": {"r1/fast", "r2/-"},
		"n2": {"r0/-", "r2/-"},
		"n3": {"r1/fast", "r2/-"}, // draining: sessions stay, routes go
	}
	if diff := cmp.Diff(want, peers); diff != "" {
		t.Errorf("peers (-want +got):\n%s", diff)
	}
	if plans["n3"].Routes.Len() != 0 {
		t.Errorf("draining node routes: %v", plans["n3"].Routes)
	}
}

func TestPlansL2(t *testing.T) {
	in := l2Input(t)
	in.L2[0].Interfaces = []string{"eth1", "eth0"}
	in.L2[0].NodeSelectors = sels("rack", "a")
	in.L2 = append(in.L2,
		&ipam.L2Advertisement{Tenant: tenant, ID: "l2b", Interfaces: []string{"eth2", "eth0"}},
		&ipam.L2Advertisement{Tenant: tenant, ID: "l2c", Interfaces: nil, NodeSelectors: sels("rack", "c")},
	)
	// Two allocations share 192.0.2.1.
	in.Allocations = append(in.Allocations, alloc("a0", "web", "192.0.2.1", "2001:db8::1"))
	owners := map[netip.Addr]string{addr("192.0.2.1"): "n1", addr("2001:db8::1"): "n3", addr("192.0.2.9"): "n2"}
	plans := Plans(in, owners)
	got := map[string][]ipam.PlanL2{}
	for name, p := range plans {
		if len(p.L2) > 0 {
			got[name] = p.L2
		}
	}
	want := map[string][]ipam.PlanL2{
		"n1": {{Addr: addr("192.0.2.1"), Interfaces: []string{"eth0", "eth1", "eth2"}, Allocation: "t1/a0"}},
		"n3": {{Addr: addr("2001:db8::1"), Interfaces: nil, Allocation: "t1/a0"}},
	}
	if diff := cmp.Diff(want, got, planOpts()); diff != "" {
		t.Errorf("L2 (-want +got):\n%s", diff)
	}
}

// TestPlansRoutesFamilies: a route goes to a peer only when the prefix's
// family is the family of the peer's session (its address's), whatever the
// advertisement's peer list says.
func TestPlansRoutesFamilies(t *testing.T) {
	dual := func(in *Input) {
		in.Pools["dual"] = pool(t, "dual", []string{"192.0.2.0/24", "2001:db8::/64"})
		in.Peers = []*ipam.BGPPeer{
			{Tenant: tenant, ID: "r4", MyASN: 64500, PeerASN: 65000, PeerAddress: addr("198.51.100.4")},
			peer6(),
		}
		in.Allocations = []*ipam.Allocation{alloc("a1", "dual", "192.0.2.1", "2001:db8::1")}
	}
	tests := []struct {
		name   string
		change func(in *Input)
		want   map[string][]ipam.PlanRoute
	}{
		{"no peer list: each family to its own peers", func(in *Input) {}, map[string][]ipam.PlanRoute{
			"n1": {rt("192.0.2.1/32", "r4"), rt("2001:db8::1/128", "r6")},
			"n2": {rt("192.0.2.1/32", "r4"), rt("2001:db8::1/128", "r6")},
		}},
		{"peer list naming both", func(in *Input) { in.BGP[0].Peers = []string{"r4", "r6"} }, map[string][]ipam.PlanRoute{
			"n1": {rt("192.0.2.1/32", "r4"), rt("2001:db8::1/128", "r6")},
			"n2": {rt("192.0.2.1/32", "r4"), rt("2001:db8::1/128", "r6")},
		}},
		{"peer list naming only the IPv4 peer: no IPv6 route", func(in *Input) { in.BGP[0].Peers = []string{"r4"} }, map[string][]ipam.PlanRoute{
			"n1": {rt("192.0.2.1/32", "r4")},
			"n2": {rt("192.0.2.1/32", "r4")},
		}},
		{"only IPv6 peers: no IPv4 route", func(in *Input) { in.Peers = in.Peers[1:] }, map[string][]ipam.PlanRoute{
			"n1": {rt("2001:db8::1/128", "r6")},
			"n2": {rt("2001:db8::1/128", "r6")},
		}},
		{"aggregated", func(in *Input) {
			in.BGP[0].AggregationLength = 24
			in.BGP[0].AggregationLengthV6 = 64
		}, map[string][]ipam.PlanRoute{
			"n1": {rt("192.0.2.0/24", "r4"), rt("2001:db8::/64", "r6")},
			"n2": {rt("192.0.2.0/24", "r4"), rt("2001:db8::/64", "r6")},
		}},
		{"local policy", func(in *Input) { local(in.Allocations[0], "n2") }, map[string][]ipam.PlanRoute{
			"n2": {rt("192.0.2.1/32", "r4"), rt("2001:db8::1/128", "r6")},
		}},
		{"local allocations of two nodes in one aggregate", func(in *Input) {
			in.BGP[0].AggregationLength = 24
			in.BGP[0].AggregationLengthV6 = 64
			in.Allocations = append(in.Allocations, local(alloc("a2", "dual", "192.0.2.2", "2001:db8::2"), "n2"))
			in.BGP = append(in.BGP, &ipam.BGPAdvertisement{Tenant: tenant, ID: "adv2", AggregationLength: 24,
				AggregationLengthV6: 64, Communities: []string{"2:2"}})
			in.Allocations[0].TrafficPolicy, in.Allocations[0].EndpointNodes = ipam.TrafficLocal, []string{"n1"}
		}, map[string][]ipam.PlanRoute{
			"n1": {rtc("192.0.2.0/24", "r4", 0, []uint32{2<<16 | 2}), rtc("2001:db8::/64", "r6", 0, []uint32{2<<16 | 2})},
			"n2": {rtc("192.0.2.0/24", "r4", 0, []uint32{2<<16 | 2}), rtc("2001:db8::/64", "r6", 0, []uint32{2<<16 | 2})},
		}},
		{"peer without a valid address gets nothing", func(in *Input) {
			in.Peers = append(in.Peers, &ipam.BGPPeer{Tenant: tenant, ID: "r0", MyASN: 1, PeerASN: 2})
		}, map[string][]ipam.PlanRoute{
			"n1": {rt("192.0.2.1/32", "r4"), rt("2001:db8::1/128", "r6")},
			"n2": {rt("192.0.2.1/32", "r4"), rt("2001:db8::1/128", "r6")},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := bgpInput(t)
			dual(in)
			tt.change(in)
			plans := Plans(in, nil)
			got := map[string][]ipam.PlanRoute{}
			for name, p := range plans {
				if p.Routes.Len() > 0 {
					got[name] = p.Routes.Slice()
				}
				if one := Plan(in, nil, name); !cmp.Equal(one.Routes, p.Routes, planOpts()) {
					t.Errorf("Plan(%s) routes differ from Plans': %s", name, cmp.Diff(p.Routes, one.Routes, planOpts()))
				}
			}
			if diff := cmp.Diff(tt.want, got, planOpts()); diff != "" {
				t.Errorf("routes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(refRoutes(in), got, planOpts()); diff != "" {
				t.Errorf("routes differ from the reference (-ref +got):\n%s", diff)
			}
		})
	}
}
