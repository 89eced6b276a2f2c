package planner

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// gen builds random inputs from a seeded generator. Address choices are
// narrow so that addresses are shared and prefixes aggregate.
type gen struct {
	t   testing.TB
	rng *rand.Rand
}

func newGen(t testing.TB, seed uint64) *gen { return &gen{t, rand.New(rand.NewPCG(seed, 42))} }

func (g *gen) p(prob float64) bool { return g.rng.Float64() < prob }

func (g *gen) pick(s ...string) string { return s[g.rng.IntN(len(s))] }

// maybeSels returns no selector, or one or two on the given key.
func (g *gen) maybeSels(key string, values ...string) []selector.Selector {
	switch g.rng.IntN(3) {
	case 0:
		return nil
	case 1:
		return sels(key, g.pick(values...))
	default:
		return append(sels(key, g.pick(values...)), sel(key, g.pick(values...)))
	}
}

// racks and apps are the label values random inputs use.
func racks() []string { return []string{"a", "b", "c"} }
func apps() []string  { return []string{"web", "db"} }

func (g *gen) input(nodes, allocs int) *Input {
	in := &Input{
		Pools: pools(
			pool(g.t, "p4", []string{"10.0.0.0/22"}, "tier", "front"),
			pool(g.t, "p4r", []string{"10.9.0.10-10.9.0.90"}, "tier", "back"),
			pool(g.t, "p6", []string{"2001:db8::/120"}),
		),
		BFD: map[string]*ipam.BFDProfile{"fast": {ID: "fast"}},
		Communities: []*ipam.Community{{ID: "c", Aliases: []ipam.CommunityAlias{
			{Name: "no-export", Value: "65535:65281"}, {Name: "big", Value: "large:1:2:3"}, {Name: "broken", Value: "1"},
		}}},
		L2Owners: map[netip.Addr]string{},
	}
	for i := range nodes {
		n := &ipam.Node{Tenant: tenant, Name: fmt.Sprintf("n%03d", i), Live: g.p(0.85), Draining: g.p(0.1),
			Labels: labels("rack", g.pick(racks()...), "role", g.pick("edge", "core"))}
		n.Interfaces = append(n.Interfaces, ipam.Interface{Name: "eth0", Up: g.p(0.9)})
		if g.p(0.5) {
			n.Interfaces = append(n.Interfaces, ipam.Interface{Name: "eth1", Up: g.p(0.7)})
		}
		in.Nodes = append(in.Nodes, n)
	}
	for i := range g.rng.IntN(4) {
		asn := uint32(64500)
		if g.p(0.5) {
			asn = 65000
		}
		p := &ipam.BGPPeer{Tenant: tenant, ID: fmt.Sprintf("r%d", i), MyASN: 64500, PeerASN: asn,
			PeerAddress:   netip.MustParseAddr(g.pick("192.0.2.1", "2001:db8:ff::1")),
			NodeSelectors: g.maybeSels("rack", racks()...)}
		if g.p(0.5) {
			p.BFDProfile = g.pick("fast", "gone")
		}
		in.Peers = append(in.Peers, p)
	}
	for i := range g.rng.IntN(4) {
		ad := &ipam.L2Advertisement{Tenant: tenant, ID: fmt.Sprintf("l2-%d", i), NodeSelectors: g.maybeSels("rack", racks()...)}
		g.poolsAndOwners(&ad.Pools, &ad.PoolSelectors, &ad.OwnerSelectors)
		if g.p(0.3) {
			ad.Interfaces = []string{g.pick("eth0", "eth1", "eth9")}
		}
		for range g.rng.IntN(3) {
			ad.NodePriorities = append(ad.NodePriorities, ipam.NodePriority{Priority: g.rng.IntN(3), Selector: sel("rack", g.pick(racks()...))})
		}
		in.L2 = append(in.L2, ad)
	}
	for i := range g.rng.IntN(4) {
		ad := &ipam.BGPAdvertisement{Tenant: tenant, ID: fmt.Sprintf("bgp-%d", i), NodeSelectors: g.maybeSels("role", "edge", "core"),
			LocalPref: uint32(100 * g.rng.IntN(3)), AggregationLength: []int{0, 0, 24, 30, 33}[g.rng.IntN(5)],
			AggregationLengthV6: []int{0, 124, 64}[g.rng.IntN(3)]}
		g.poolsAndOwners(&ad.Pools, &ad.PoolSelectors, &ad.OwnerSelectors)
		for range g.rng.IntN(3) {
			ad.Peers = append(ad.Peers, g.pick("r0", "r1", "r2", "r3"))
		}
		for range g.rng.IntN(3) {
			ad.Communities = append(ad.Communities, g.pick("64500:1", "64500:2", "no-export", "big", "broken", "large:9:9:9", "nope"))
		}
		in.BGP = append(in.BGP, ad)
	}
	for i := range allocs {
		in.Allocations = append(in.Allocations, g.alloc(fmt.Sprintf("a%04d", i), nodes))
	}
	for _, a := range in.Allocations {
		for _, ad := range a.Addrs {
			if g.p(0.3) {
				in.L2Owners[ad] = fmt.Sprintf("n%03d", g.rng.IntN(nodes+1))
			}
		}
	}
	return in
}

func (g *gen) poolsAndOwners(ps *[]string, poolSels, ownerSels *[]selector.Selector) {
	switch g.rng.IntN(3) {
	case 1:
		*ps = []string{g.pick("p4", "p4r", "p6", "gone")}
	case 2:
		*poolSels = sels("tier", g.pick("front", "back"))
	}
	if g.p(0.3) {
		*ownerSels = sels("app", g.pick(apps()...))
	}
}

// alloc is a random allocation; addresses come from small sets so that they
// collide.
func (g *gen) alloc(id string, nodes int) *ipam.Allocation {
	a := &ipam.Allocation{Tenant: tenant, ID: id, OwnerLabels: selector.SetOf(labels("app", g.pick(apps()...)))}
	switch g.rng.IntN(3) {
	case 0:
		a.Pool = "p4"
		a.Addrs = []netip.Addr{netip.AddrFrom4([4]byte{10, 0, byte(g.rng.IntN(4)), byte(g.rng.IntN(256))})}
		if g.p(0.3) {
			a.Addrs = append(a.Addrs, netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", g.rng.IntN(256))))
		}
	case 1:
		a.Pool = "p4r"
		a.Addrs = []netip.Addr{netip.AddrFrom4([4]byte{10, 9, 0, byte(10 + g.rng.IntN(81))})}
	default:
		a.Pool = "p6"
		a.Addrs = []netip.Addr{netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", g.rng.IntN(256)))}
	}
	if g.p(0.2) {
		// Several addresses per family (active-active L2): one more
		// address of each family per extra slot, from the same small sets
		// (so that, unlike with the allocator, some are shared).
		a.AddressCount = 2 + g.rng.IntN(4)
		base := slices.Clone(a.Addrs)
		for range a.AddressCount - 1 {
			for _, ad := range base {
				switch {
				case ad.Is6():
					a.Addrs = append(a.Addrs, netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", g.rng.IntN(256))))
				case a.Pool == "p4r":
					a.Addrs = append(a.Addrs, netip.AddrFrom4([4]byte{10, 9, 0, byte(10 + g.rng.IntN(81))}))
				default:
					a.Addrs = append(a.Addrs, netip.AddrFrom4([4]byte{10, 0, byte(g.rng.IntN(4)), byte(g.rng.IntN(256))}))
				}
			}
		}
		slices.SortFunc(a.Addrs, netip.Addr.Compare)
		a.Addrs = slices.Compact(a.Addrs)
	}
	if g.p(0.3) {
		a.TrafficPolicy = ipam.TrafficLocal
		for range g.rng.IntN(4) {
			a.EndpointNodes = append(a.EndpointNodes, fmt.Sprintf("n%03d", g.rng.IntN(nodes+1)))
		}
	}
	return a
}

// shuffled returns a copy of in with every slice in a different order.
func shuffled(rng *rand.Rand, in *Input) *Input {
	out := *in
	sh := func(n int, swap func(i, j int)) { rng.Shuffle(n, swap) }
	out.Nodes = nil
	for _, n := range in.Nodes {
		c := *n
		c.Interfaces = slices.Clone(n.Interfaces)
		sh(len(c.Interfaces), func(i, j int) { c.Interfaces[i], c.Interfaces[j] = c.Interfaces[j], c.Interfaces[i] })
		out.Nodes = append(out.Nodes, &c)
	}
	out.Allocations = nil
	for _, a := range in.Allocations {
		c := *a
		c.Addrs = slices.Clone(a.Addrs)
		c.EndpointNodes = slices.Clone(a.EndpointNodes)
		sh(len(c.Addrs), func(i, j int) { c.Addrs[i], c.Addrs[j] = c.Addrs[j], c.Addrs[i] })
		sh(len(c.EndpointNodes), func(i, j int) { c.EndpointNodes[i], c.EndpointNodes[j] = c.EndpointNodes[j], c.EndpointNodes[i] })
		out.Allocations = append(out.Allocations, &c)
	}
	out.BGP = nil
	for _, ad := range in.BGP {
		c := *ad
		c.Peers = slices.Clone(ad.Peers)
		c.Communities = slices.Clone(ad.Communities)
		sh(len(c.Peers), func(i, j int) { c.Peers[i], c.Peers[j] = c.Peers[j], c.Peers[i] })
		sh(len(c.Communities), func(i, j int) { c.Communities[i], c.Communities[j] = c.Communities[j], c.Communities[i] })
		out.BGP = append(out.BGP, &c)
	}
	out.L2 = nil
	for _, ad := range in.L2 {
		c := *ad
		c.Interfaces = slices.Clone(ad.Interfaces)
		sh(len(c.Interfaces), func(i, j int) { c.Interfaces[i], c.Interfaces[j] = c.Interfaces[j], c.Interfaces[i] })
		out.L2 = append(out.L2, &c)
	}
	out.Peers = slices.Clone(in.Peers)
	out.Communities = slices.Clone(in.Communities)
	for _, s := range []func(){
		func() { sh(len(out.Nodes), func(i, j int) { out.Nodes[i], out.Nodes[j] = out.Nodes[j], out.Nodes[i] }) },
		func() {
			sh(len(out.Allocations), func(i, j int) { out.Allocations[i], out.Allocations[j] = out.Allocations[j], out.Allocations[i] })
		},
		func() { sh(len(out.BGP), func(i, j int) { out.BGP[i], out.BGP[j] = out.BGP[j], out.BGP[i] }) },
		func() { sh(len(out.L2), func(i, j int) { out.L2[i], out.L2[j] = out.L2[j], out.L2[i] }) },
		func() { sh(len(out.Peers), func(i, j int) { out.Peers[i], out.Peers[j] = out.Peers[j], out.Peers[i] }) },
		func() {
			sh(len(out.Communities), func(i, j int) { out.Communities[i], out.Communities[j] = out.Communities[j], out.Communities[i] })
		},
	} {
		s()
	}
	return &out
}

const seeds = 300

// TestPropertyL2 checks, on random inputs, that every address an L2
// advertisement selects has exactly one owner when a node is eligible, that
// the owner is eligible and in the best tier, that a sticky owner still
// eligible keeps it, and that exactly that node's plan answers for it.
func TestPropertyL2(t *testing.T) {
	for seed := range uint64(seeds) {
		in := newGen(t, seed).input(1+int(seed%12), 1+int(seed%40))
		owners := L2Owners(in)
		if diff := cmp.Diff(owners, L2Owners(withOwners(in, owners))); diff != "" {
			t.Fatalf("seed %d: L2Owners is not idempotent (-first +again):\n%s", seed, diff)
		}
		plans := Plans(in, owners)
		answering := ownersOf(plans)
		for _, a := range in.Allocations {
			for _, ad := range a.Addrs {
				best, _ := refEligible(in, ad)
				o, owned := owners[ad]
				anchor, group := refAnchor(in, ad)
				follows := anchor != ad && slices.Contains(best, owners[anchor])
				switch {
				case len(best) == 0 && owned:
					t.Fatalf("seed %d: %s owned by %s, but no node is eligible", seed, ad, o)
				case len(best) > 0 && !slices.Contains(best, o):
					t.Fatalf("seed %d: %s owned by %q, want one of %v", seed, ad, o, best)
				case follows && o != owners[anchor]:
					t.Fatalf("seed %d: %s owned by %s, not by its anchor %s's owner %s, who is eligible", seed, ad, o, anchor, owners[anchor])
				case !follows && !group && (anchor == ad || owners[anchor] == "") && slices.Contains(best, in.L2Owners[ad]) && o != in.L2Owners[ad]:
					// (An address whose anchor's owner is not eligible for it
					// hashes the anchor, as L2Owners documents.)
					t.Fatalf("seed %d: %s moved from eligible %s to %s", seed, ad, in.L2Owners[ad], o)
				}
				var want []string
				if owned {
					want = []string{o}
				}
				if diff := cmp.Diff(want, answering[ad]); diff != "" {
					t.Fatalf("seed %d: nodes answering for %s (-want +got):\n%s", seed, ad, diff)
				}
			}
		}
	}
}

// refAnchor returns the address whose owner ad follows: the lowest address
// of the allocation with the lowest name among those holding ad that an L2
// advertisement selects, or of ad's slot in it if it has several addresses
// per family (ad itself when there is none); group reports that allocation
// having several addresses per family and being the only one.
func refAnchor(in *Input, ad netip.Addr) (anchor netip.Addr, group bool) {
	var first *ipam.Allocation
	holders := 0
	for _, a := range in.Allocations {
		if !slices.Contains(a.Addrs, ad) || !slices.ContainsFunc(in.L2, func(l2 *ipam.L2Advertisement) bool { return refL2Selects(in, l2, a) }) {
			continue
		}
		holders++
		if first == nil || allocName(a) < allocName(first) {
			first = a
		}
	}
	if first == nil {
		return ad, false
	}
	if first.AddressCount <= 1 {
		return slices.MinFunc(first.Addrs, netip.Addr.Compare), false
	}
	// The slot: the addresses of the same rank in each family.
	var fams [2][]netip.Addr
	for _, a := range first.Addrs {
		if a.Is4() {
			fams[0] = append(fams[0], a)
		} else {
			fams[1] = append(fams[1], a)
		}
	}
	for _, f := range fams {
		slices.SortFunc(f, netip.Addr.Compare)
	}
	own, other := fams[0], fams[1]
	if ad.Is6() {
		own, other = other, own
	}
	anchor = ad
	if k := slices.Index(own, ad); k < len(other) && other[k].Less(ad) {
		anchor = other[k]
	}
	return anchor, holders == 1
}

// TestPropertySpread checks, on random inputs, that the slots of an
// allocation with several addresses per family, held by it alone, are
// spread: no node owns more than its share (ceil(slots/candidates)), and
// with as many candidates as slots they all have distinct owners.
func TestPropertySpread(t *testing.T) {
	checked := 0
	for seed := range uint64(seeds) {
		in := newGen(t, seed).input(1+int(seed%12), 1+int(seed%40))
		owners := L2Owners(in)
		for _, a := range in.Allocations {
			if a.AddressCount <= 1 {
				continue
			}
			perNode := map[string]int{}
			slots, cands := 0, 0
			for _, ad := range a.Addrs {
				anchor, group := refAnchor(in, ad)
				best, _ := refEligible(in, ad)
				if !group || anchor != ad || len(best) == 0 {
					continue
				}
				slots++
				cands = len(best)
				perNode[owners[ad]]++
			}
			if slots < 2 {
				continue
			}
			checked++
			share := (slots + cands - 1) / cands
			for node, n := range perNode {
				if n > share {
					t.Fatalf("seed %d: %s owns %d of the %d slots of %s over %d candidates, more than %d", seed, node, n, slots, a.ID, cands, share)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d allocations with several slots checked", checked)
	}
}

// TestPropertyRoutes checks Plans' routes against the naive reference on
// random inputs.
func TestPropertyRoutes(t *testing.T) {
	for seed := range uint64(seeds) {
		in := newGen(t, seed).input(1+int(seed%12), 1+int(seed%40))
		got := map[string][]ipam.PlanRoute{}
		for name, p := range Plans(in, nil) {
			if p.Routes.Len() > 0 {
				got[name] = p.Routes.Slice()
			}
		}
		if diff := cmp.Diff(refRoutes(in), got, planOpts()); diff != "" {
			t.Fatalf("seed %d: routes (-ref +got):\n%s", seed, diff)
		}
	}
}

// TestDeterminism: the same input in any order gives the same output.
func TestDeterminism(t *testing.T) {
	for seed := range uint64(100) {
		in := newGen(t, seed).input(10, 40)
		owners, plans, warnings := L2Owners(in), Plans(in, L2Owners(in)), Check(in)
		rng := rand.New(rand.NewPCG(seed, 7))
		for range 3 {
			s := shuffled(rng, in)
			if diff := cmp.Diff(owners, L2Owners(s)); diff != "" {
				t.Fatalf("seed %d: owners (-first +shuffled):\n%s", seed, diff)
			}
			if diff := cmp.Diff(plans, Plans(s, owners), planOpts()); diff != "" {
				t.Fatalf("seed %d: plans (-first +shuffled):\n%s", seed, diff)
			}
			if diff := cmp.Diff(warnings, Check(s)); diff != "" {
				t.Fatalf("seed %d: warnings (-first +shuffled):\n%s", seed, diff)
			}
		}
	}
}

// TestPlanOneNode: Plan gives each node what Plans gives it.
func TestPlanOneNode(t *testing.T) {
	for seed := range uint64(100) {
		in := newGen(t, seed).input(1+int(seed%12), 1+int(seed%40))
		owners := L2Owners(in)
		all := Plans(in, owners)
		for i := range 13 {
			name := fmt.Sprintf("n%03d", i)
			if diff := cmp.Diff(all[name], Plan(in, owners, name), planOpts()); diff != "" {
				t.Fatalf("seed %d, %s (-Plans +Plan):\n%s", seed, name, diff)
			}
		}
	}
}
