package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/addrspace"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/planner"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// planInput builds one tenant with nodes nodes (50 per rack, every tenth an
// edge node) and allocs allocations, half announced over L2 from two
// preferred racks, half over BGP to two peers; a fifth with the LOCAL
// traffic policy on three random nodes. Addresses are values in memory
// only (198.18.0.0/15, the benchmarking range).
func planInput(nodes, allocs int) (*planner.Input, error) {
	const tenant = "bench"
	sel := func(k, v string) selector.Selector { return selector.Selector{MatchLabels: map[string]string{k: v}} }
	mkPool := func(id, cidr, mode string) (*ipam.Pool, error) {
		r, err := addrspace.ParseRange(cidr)
		if err != nil {
			return nil, err
		}
		return &ipam.Pool{Name: id, AutoAssign: true, Ranges: []addrspace.Range{r}, Labels: map[string]string{"mode": mode}}, nil
	}
	l2pool, err := mkPool("l2pool", "198.18.0.0/16", "l2")
	if err != nil {
		return nil, err
	}
	bgppool, err := mkPool("bgppool", "198.19.0.0/16", "bgp")
	if err != nil {
		return nil, err
	}
	in := &planner.Input{
		Pools: map[string]*ipam.Pool{"l2pool": l2pool, "bgppool": bgppool},
		L2: []*ipam.L2Advertisement{{Tenant: tenant, ID: "l2", PoolSelectors: []selector.Selector{sel("mode", "l2")}, Interfaces: []string{"eth0"},
			NodePriorities: []ipam.NodePriority{{Priority: 1, Selector: sel("rack", "r00")}, {Priority: 1, Selector: sel("rack", "r01")}}}},
		BGP: []*ipam.BGPAdvertisement{
			{Tenant: tenant, ID: "all", Pools: []string{"bgppool"}, Communities: []string{"64500:100"}},
			{Tenant: tenant, ID: "edge", Pools: []string{"bgppool"}, NodeSelectors: []selector.Selector{sel("role", "edge")}, Peers: []string{"spine-a"}, LocalPref: 200},
		},
		Peers: []*ipam.BGPPeer{
			{Tenant: tenant, ID: "spine-a", MyASN: 64500, PeerASN: 64500, PeerAddress: netip.MustParseAddr("192.0.2.1")},
			{Tenant: tenant, ID: "spine-b", MyASN: 64500, PeerASN: 65000, PeerAddress: netip.MustParseAddr("192.0.2.2"), NodeSelectors: []selector.Selector{sel("role", "edge")}},
		},
		BFD:      map[string]*ipam.BFDProfile{},
		L2Owners: map[netip.Addr]string{},
	}
	eth0 := []ipam.Interface{{Name: "eth0", Up: true}}
	for i := range nodes {
		role := "worker"
		if i%10 == 0 {
			role = "edge"
		}
		in.Nodes = append(in.Nodes, &ipam.Node{Tenant: tenant, Name: fmt.Sprintf("node-%04d", i), Live: true, Interfaces: eth0,
			Labels: map[string]string{"rack": fmt.Sprintf("r%02d", i/50), "role": role}})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range allocs {
		pool, second := "l2pool", byte(18)
		if i%2 == 1 {
			pool, second = "bgppool", 19
		}
		addr := netip.AddrFrom4([4]byte{198, second, byte(i / 2 / 250), byte(1 + i/2%250)})
		a := &ipam.Allocation{Tenant: tenant, ID: fmt.Sprintf("a%06d", i), Owner: fmt.Sprintf("ns/svc-%d", i), Pool: pool, Addrs: []netip.Addr{addr}}
		if i%5 == 0 {
			a.TrafficPolicy = ipam.TrafficLocal
			for range 3 {
				a.EndpointNodes = append(a.EndpointNodes, fmt.Sprintf("node-%04d", rng.IntN(nodes)))
			}
		}
		in.Allocations = append(in.Allocations, a)
	}
	return in, nil
}

// planBench measures the planner: a full recompute of 1,000 nodes and
// 10,000 allocations (L2 owners, then every plan), and the incremental path
// for one allocation change (planner.Affected).
func planBench(log io.Writer) ([]Figure, error) {
	in, err := planInput(1000, 10000)
	if err != nil {
		return nil, err
	}
	full := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			owners := planner.L2Owners(in)
			_ = planner.Plans(in, owners)
		}
	})
	owners := planner.L2Owners(in)
	in.L2Owners = owners
	last := in.Allocations[len(in.Allocations)-1]
	in.Allocations = in.Allocations[:len(in.Allocations)-1]
	single := testing.Benchmark(func(b *testing.B) {
		for b.Loop() {
			_, _ = planner.Affected(in, nil, last, owners)
		}
	})
	perOp := func(r testing.BenchmarkResult) float64 {
		return float64(r.T) / float64(r.N) / float64(time.Millisecond)
	}
	fmt.Fprintf(log, "== planner: full 1000x10000 %.1f ms/op (%d ops), single change %.3f ms/op (%d ops)\n", perOp(full), full.N, perOp(single), single.N)
	return []Figure{
		{"plan_full_1000x10000", perOp(full), "ms"},
		{"plan_single_change", perOp(single), "ms"},
	}, nil
}
