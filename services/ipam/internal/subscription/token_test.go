package subscription

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/planner"
)

// randomPlan is a plan drawn from few peers, prefixes and addresses, so
// that two draws share entries and differ in others.
func randomPlan(rng *rand.Rand, routes int) *ipam.NodePlan {
	p := &ipam.NodePlan{}
	for i := range 3 {
		if rng.IntN(2) == 0 {
			p.Peers = append(p.Peers, ipam.PlanPeer{Peer: &ipam.BGPPeer{ID: fmt.Sprintf("peer-%d", i), PeerASN: uint32(64500 + rng.IntN(2))}})
		}
	}
	seen := map[ipam.RouteKey]bool{}
	var rs []ipam.PlanRoute
	for range rng.IntN(routes + 1) {
		i := rng.IntN(2 * routes)
		r := ipam.PlanRoute{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, byte(i / 256), byte(i % 256)}), 32),
			Peer: fmt.Sprintf("peer-%d", rng.IntN(3)), LocalPref: uint32(rng.IntN(2) * 100)}
		if rng.IntN(3) == 0 {
			r.Communities = []uint32{uint32(rng.IntN(3))}
		}
		if !seen[r.Key()] {
			seen[r.Key()] = true
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b ipam.PlanRoute) int { return ipam.CompareRouteKeys(a.Key(), b.Key()) })
	p.Routes = ipam.RoutesOf(rs)
	for i := range 20 {
		if rng.IntN(3) == 0 {
			l := ipam.PlanL2{Addr: netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i)}), Allocation: fmt.Sprintf("t/a%d", rng.IntN(2))}
			if rng.IntN(2) == 0 {
				l.Interfaces = []string{"eth0"}
			}
			p.L2 = append(p.L2, l)
		}
	}
	return p
}

// TestTokenIncremental: along random sequences of plans, the token each
// change's message carries, computed from the last one and the change,
// is the token of the whole new plan; the tokens of different plans differ,
// and a token parses back to its digest.
func TestTokenIncremental(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 3))
		size := 1 + rng.IntN(600)
		cur := randomPlan(rng, size)
		var tok tokens
		if got, want := tok.next(cur, cur, nil), Token(cur); got != want {
			t.Fatalf("seed %d: snapshot token %q, want %q", seed, got, want)
		}
		for step := range 20 {
			next := randomPlan(rng, size)
			if step%3 == 0 { // a small change: one route's attributes, one L2 address gone
				next = planner.Apply(cur, &planner.Delta{})
				if rs := cur.Routes.Slice(); len(rs) > 0 {
					r := rs[rng.IntN(len(rs))]
					r.LocalPref++
					next.Routes = cur.Routes.Patch([]ipam.PlanRoute{r}, nil)
				}
				if len(next.L2) > 0 {
					next.L2 = next.L2[1:]
				}
			}
			d := planner.Diff(cur, next)
			if step%4 == 1 { // a delta that upserts what it removes: the removal wins, as in Apply
				if rs := cur.Routes.Slice(); len(rs) > 0 {
					r := rs[rng.IntN(len(rs))]
					d.RemoveRoutes = insertSorted(d.RemoveRoutes, r.Key(), ipam.CompareRouteKeys)
					r.MED++
					d.UpsertRoutes = insertSorted(d.UpsertRoutes, r, func(a, b ipam.PlanRoute) int { return ipam.CompareRouteKeys(a.Key(), b.Key()) })
				}
				if len(cur.L2) > 0 {
					l := cur.L2[0]
					d.RemoveL2 = insertSorted(d.RemoveL2, l.Addr, func(a, b netip.Addr) int { return a.Compare(b) })
					l.Allocation += "x"
					d.UpsertL2 = insertSorted(d.UpsertL2, l, func(a, b ipam.PlanL2) int { return a.Addr.Compare(b.Addr) })
				}
				next = planner.Apply(cur, d)
			}
			got := tok.next(next, nil, d)
			if want := Token(next); got != want {
				t.Fatalf("seed %d step %d: token after the change %q, want the plan's %q", seed, step, got, want)
			}
			same := planner.Diff(cur, next).Empty()
			if differ := Token(cur) != got; differ == same {
				t.Fatalf("seed %d step %d: tokens differ %v, plans differ %v", seed, step, differ, !same)
			}
			if dg, ok := parseToken(got); !ok || dg != digestOf(next) {
				t.Fatalf("seed %d step %d: token %q does not parse back to the plan's digest", seed, step, got)
			}
			cur = next
		}
	}
}

// insertSorted puts v in sorted list s in its place, replacing an equal
// entry, in a new slice.
func insertSorted[T any](s []T, v T, cmp func(a, b T) int) []T {
	i, found := slices.BinarySearchFunc(s, v, cmp)
	s = slices.Clone(s)
	if found {
		s[i] = v
		return s
	}
	return slices.Insert(s, i, v)
}

// TestTokenContent: the token does not depend on the order of the plan's
// peers and L2 addresses, and changes with any one field.
func TestTokenContent(t *testing.T) {
	base := func() *ipam.NodePlan {
		return &ipam.NodePlan{
			Peers: []ipam.PlanPeer{{Peer: &ipam.BGPPeer{ID: "a"}}, {Peer: &ipam.BGPPeer{ID: "b"}}},
			Routes: ipam.RoutesOf([]ipam.PlanRoute{{Prefix: netip.MustParsePrefix("198.51.100.1/32"), Peer: "a",
				Communities: []uint32{1}, LargeCommunities: [][3]uint32{{1, 2, 3}}}}),
			L2: []ipam.PlanL2{{Addr: netip.MustParseAddr("203.0.113.1"), Interfaces: []string{"eth0"}, Allocation: "t/a"},
				{Addr: netip.MustParseAddr("2001:db8::1")}},
		}
	}
	want := Token(base())
	swapped := base()
	slices.Reverse(swapped.Peers)
	slices.Reverse(swapped.L2)
	if got := Token(swapped); got != want {
		t.Errorf("token with peers and L2 in another order %q, want %q", got, want)
	}
	route := func(f func(*ipam.PlanRoute)) func(*ipam.NodePlan) {
		return func(p *ipam.NodePlan) {
			rs := p.Routes.Slice()
			f(&rs[0])
			p.Routes = ipam.RoutesOf(rs)
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*ipam.NodePlan)
	}{
		{"peer field", func(p *ipam.NodePlan) { p.Peers[0].Peer = &ipam.BGPPeer{ID: "a", PeerASN: 1} }},
		{"peer gone", func(p *ipam.NodePlan) { p.Peers = p.Peers[1:] }},
		{"route prefix length", route(func(r *ipam.PlanRoute) { r.Prefix = netip.MustParsePrefix("198.51.100.0/31") })},
		{"route peer", route(func(r *ipam.PlanRoute) { r.Peer = "b" })},
		{"route community", route(func(r *ipam.PlanRoute) { r.Communities = []uint32{2} })},
		{"route communities moved", route(func(r *ipam.PlanRoute) { r.Communities, r.LargeCommunities = nil, [][3]uint32{{1, 2, 3}, {1, 0, 0}} })},
		{"route local preference", route(func(r *ipam.PlanRoute) { r.LocalPref = 1 })},
		{"route MED", route(func(r *ipam.PlanRoute) { r.MED = 1 })},
		{"route prepend", route(func(r *ipam.PlanRoute) { r.ASPathPrepend = 1 })},
		{"routes gone", func(p *ipam.NodePlan) { p.Routes = ipam.Routes{} }},
		{"L2 interfaces", func(p *ipam.NodePlan) { p.L2[0].Interfaces = nil }},
		{"L2 interface name", func(p *ipam.NodePlan) { p.L2[0].Interfaces = []string{"eth1"} }},
		{"L2 allocation", func(p *ipam.NodePlan) { p.L2[0].Allocation = "t/b" }},
		{"L2 address", func(p *ipam.NodePlan) { p.L2[1].Addr = netip.MustParseAddr("2001:db8::2") }},
		{"L2 IPv4-mapped", func(p *ipam.NodePlan) { p.L2[0].Addr = netip.MustParseAddr("::ffff:203.0.113.1") }},
	} {
		p := base()
		tc.change(p)
		if Token(p) == want {
			t.Errorf("%s: the token did not change", tc.name)
		}
	}
	if Token(nil) != "" {
		t.Error("a nil plan has a token")
	}
}

// jsonDigest is the "p1." digest: SHA-256 of the whole plan's JSON, what
// every plan message cost before the digest was a sum (the routes as the
// plain slice they were then).
func jsonDigest(p *ipam.NodePlan) [sha256.Size]byte {
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(struct {
		Peers  []ipam.PlanPeer
		Routes []ipam.PlanRoute
		L2     []ipam.PlanL2
	}{p.Peers, p.Routes.Slice(), p.L2})
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// BenchmarkTokenPerChange is the token of one plan message after a change
// of one route, for a node with R routes: as it was (the whole plan
// hashed), and as it is (the last token updated with the change).
func BenchmarkTokenPerChange(b *testing.B) {
	for _, routes := range []int{6000, 60000} {
		var rs []ipam.PlanRoute
		for i := range routes {
			rs = append(rs, ipam.PlanRoute{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32),
				Peer: "spine-a", Communities: []uint32{64500<<16 | 100}})
		}
		p := &ipam.NodePlan{Peers: []ipam.PlanPeer{{Peer: &ipam.BGPPeer{ID: "spine-a", PeerASN: 64500}}}, Routes: ipam.RoutesOf(rs)}
		added := ipam.PlanRoute{Prefix: netip.MustParsePrefix("198.51.100.1/32"), Peer: "spine-a"}
		next := planner.Apply(p, &planner.Delta{UpsertRoutes: []ipam.PlanRoute{added}})
		d := planner.Diff(p, next)
		b.Run(fmt.Sprintf("routes=%d/before-whole-plan-json", routes), func(b *testing.B) {
			for b.Loop() {
				jsonDigest(next)
			}
		})
		b.Run(fmt.Sprintf("routes=%d/after-incremental", routes), func(b *testing.B) {
			tok := tokens{plan: p, d: digestOf(p)}
			for b.Loop() {
				t := tok
				t.next(next, nil, d)
			}
		})
		b.Run(fmt.Sprintf("routes=%d/whole-plan-sum", routes), func(b *testing.B) {
			for b.Loop() {
				digestOf(next)
			}
		})
	}
}
