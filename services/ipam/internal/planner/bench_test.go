package planner

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// benchInput is a tenant of `nodes` nodes in racks of 50 (every tenth node
// an edge node; one in fifty draining) and `allocs` allocations, half from
// an L2 pool and half from a BGP pool, one in five with the LOCAL traffic
// policy and three endpoint nodes. One L2 advertisement prefers the first two
// racks; two BGP advertisements (every node to every peer with a community,
// and edge nodes with a local preference to the iBGP peer) and two peers
// (iBGP with BFD on every node, eBGP on edge nodes).
//
// With localBGP false, the LOCAL allocations are all in the L2 pool, so
// that every node of a class shares one Routes list.
func benchInput(b testing.TB, nodes, allocs int, localBGP bool) *Input {
	rng := rand.New(rand.NewPCG(1, 2))
	in := &Input{
		Pools: pools(
			pool(b, "l2pool", []string{"10.0.0.0/16"}, "mode", "l2"),
			pool(b, "bgppool", []string{"10.1.0.0/16"}, "mode", "bgp"),
		),
		L2: []*ipam.L2Advertisement{{Tenant: tenant, ID: "l2", PoolSelectors: sels("mode", "l2"), Interfaces: []string{"eth0"},
			NodePriorities: []ipam.NodePriority{
				{Priority: 1, Selector: sel("rack", "r00")},
				{Priority: 1, Selector: sel("rack", "r01")},
			}}},
		BGP: []*ipam.BGPAdvertisement{
			{Tenant: tenant, ID: "all", Pools: []string{"bgppool"}, Communities: []string{"64500:100"}},
			{Tenant: tenant, ID: "edge", Pools: []string{"bgppool"}, NodeSelectors: sels("role", "edge"),
				Peers: []string{"spine-a"}, LocalPref: 200},
		},
		Peers: []*ipam.BGPPeer{
			{Tenant: tenant, ID: "spine-a", MyASN: 64500, PeerASN: 64500, PeerAddress: addr("10.255.0.1"), BFDProfile: "fast"},
			{Tenant: tenant, ID: "spine-b", MyASN: 64500, PeerASN: 65000, PeerAddress: addr("10.255.0.2"),
				NodeSelectors: sels("role", "edge")},
		},
		BFD:      map[string]*ipam.BFDProfile{"fast": {Tenant: tenant, ID: "fast"}},
		L2Owners: map[netip.Addr]string{},
	}
	for i := range nodes {
		n := node(fmt.Sprintf("node-%04d", i), "rack", fmt.Sprintf("r%02d", i/50), "role", "worker")
		if i%10 == 0 {
			n.Labels["role"] = "edge"
		}
		n.Draining = i%50 == 49
		in.Nodes = append(in.Nodes, n)
	}
	for i := range allocs {
		p, base := "l2pool", 0
		if i%2 == 1 {
			p, base = "bgppool", 1
		}
		a := alloc(fmt.Sprintf("a%06d", i), p, netip.AddrFrom4([4]byte{10, byte(base), byte(i / 2 / 250), byte(1 + i/2%250)}).String())
		isLocal := i%5 == 0
		if !localBGP {
			isLocal = p == "l2pool" && (i%5 == 0 || i%5 == 1) // as many, all L2
		}
		if isLocal {
			local(a, fmt.Sprintf("node-%04d", rng.IntN(nodes)), fmt.Sprintf("node-%04d", rng.IntN(nodes)),
				fmt.Sprintf("node-%04d", rng.IntN(nodes)))
		}
		in.Allocations = append(in.Allocations, a)
	}
	return in
}

func reportMS(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
}

// BenchmarkPlanFull1000x10000 plans 1,000 nodes and 10,000 allocations from
// scratch: L2 owners, then every node's plan; and, apart, each step and
// Check.
func BenchmarkPlanFull1000x10000(b *testing.B) {
	in := benchInput(b, 1000, 10000, true)
	owners := L2Owners(in)
	in.L2Owners = owners
	b.Run("owners+plans", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Plans(in, L2Owners(in))
		}
		reportMS(b)
	})
	b.Run("owners", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			L2Owners(in)
		}
		reportMS(b)
	})
	b.Run("plans", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Plans(in, owners)
		}
		reportMS(b)
	})
	b.Run("plans-without-local-bgp", func(b *testing.B) {
		in := benchInput(b, 1000, 10000, false)
		owners := L2Owners(in)
		b.ReportAllocs()
		for b.Loop() {
			Plans(in, owners)
		}
		reportMS(b)
	})
	b.Run("plan-one-node", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Plan(in, owners, "node-0500")
		}
		reportMS(b)
	})
	b.Run("check", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Check(in)
		}
		reportMS(b)
	})
}

// BenchmarkPlanSingleChange is the incremental path in the same tenant: one
// allocation allocated (L2 or BGP) or its endpoints updated.
func BenchmarkPlanSingleChange(b *testing.B) {
	in := benchInput(b, 1000, 10000, true)
	owners := L2Owners(in)
	in.L2Owners = owners
	newL2 := alloc("new-l2", "l2pool", "10.0.200.1")
	newBGP := alloc("new-bgp", "bgppool", "10.1.200.1")
	before := in.Allocations[1] // BGP pool, CLUSTER
	after := *before
	local(&after, "node-0001", "node-0002")
	cases := []struct {
		name          string
		before, after *ipam.Allocation
	}{
		{"allocate-l2", nil, newL2},
		{"allocate-bgp", nil, newBGP},
		{"release-bgp", before, nil},
		{"update-endpoints-bgp", before, &after},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Affected(in, c.before, c.after, owners)
			}
			reportMS(b)
		})
	}
}

// indexedAllocs indexes allocations by address, as the IPAM's state does,
// for Replan in benchmarks (allocsOf walks them all for every address).
func indexedAllocs(list []*ipam.Allocation) (Allocations, map[netip.Addr][]*ipam.Allocation) {
	byAddr := map[netip.Addr][]*ipam.Allocation{}
	for _, a := range list {
		for _, ad := range a.Addrs {
			byAddr[ad] = append(byAddr[ad], a)
		}
	}
	return Allocations{
		All:     slices.Values(list),
		Holding: func(addr netip.Addr) []*ipam.Allocation { return byAddr[addr] },
	}, byAddr
}

// BenchmarkReplanRouteChange is what the IPAM does for one allocation
// announced over BGP, on every node of its tenant: Replan and ApplyAll of
// its allocation, then of its release (one op is both). The large case is
// one tenant of 100,000 allocations (50,000 BGP-announced addresses: 50,000
// routes per node, 100,000 on edge nodes) over 300 nodes; the small one is
// a tenant of the 100-tenant scale run (10,000 allocations, 100 nodes).
func BenchmarkReplanRouteChange(b *testing.B) {
	for _, sz := range []struct{ nodes, allocs int }{{100, 10000}, {300, 100000}} {
		b.Run(fmt.Sprintf("%dx%d", sz.nodes, sz.allocs), func(b *testing.B) {
			in := benchInput(b, sz.nodes, sz.allocs, false)
			owners := L2Owners(in)
			in.L2Owners = owners
			p := Prepare(in)
			plans := Plans(in, owners)
			b.ReportMetric(float64(plans["node-0001"].Routes.Len()), "routes/node")
			added := alloc("new-bgp", "bgppool", "10.1.250.1")
			with, _ := indexedAllocs(append(slices.Clip(in.Allocations), added))
			without, _ := indexedAllocs(in.Allocations)
			owner := func(a netip.Addr) string { return owners[a] }
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				d := p.Replan(plans, with, Change{Allocations: []*ipam.Allocation{added}}, owner)
				if len(d) == 0 {
					b.Fatal("no node's plan changed")
				}
				ApplyAll(plans, d)
				ApplyAll(plans, p.Replan(plans, without, Change{Allocations: []*ipam.Allocation{added}}, owner))
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N)/2, "ms/change")
		})
	}
}
