package ipam

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var routeOpts = cmp.Options{cmpopts.EquateEmpty(), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })}

// randomRoute is a route among few prefixes (so that prefixes have several
// peers, and their routes straddle chunks) and three peers.
func randomRoute(rng *rand.Rand, prefixes int) PlanRoute {
	i := rng.IntN(prefixes)
	p := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, byte(i / 256), byte(i % 256)}), 32)
	if i%7 == 0 {
		p = netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i / 256), 15: byte(i % 256)}), 128)
	}
	return PlanRoute{Prefix: p, Peer: fmt.Sprintf("peer-%d", rng.IntN(3)), LocalPref: uint32(rng.IntN(3)),
		Communities: []uint32{uint32(rng.IntN(2))}}
}

// sortedRoutes returns the routes of m in key order.
func sortedRoutes(m map[RouteKey]PlanRoute) []PlanRoute {
	return slices.SortedFunc(maps.Values(m), func(a, b PlanRoute) int { return CompareRouteKeys(a.Key(), b.Key()) })
}

// checkChunks checks Routes' invariants: chunks not empty, none above
// twice the chunk size, n their total.
func checkChunks(t *testing.T, label string, r Routes) {
	t.Helper()
	n := 0
	for i, c := range r.chunks {
		if len(c) == 0 || len(c) > 2*routeChunk {
			t.Fatalf("%s: chunk %d of %d has %d routes", label, i, len(r.chunks), len(c))
		}
		n += len(c)
	}
	if n != r.n {
		t.Fatalf("%s: Len %d, chunks hold %d", label, r.n, n)
	}
}

// TestRoutesPatchProperty: random changes (batches of upserts, attribute
// changes and removals, of every size up to the whole list) patched into
// chunked Routes give what a sorted map of the routes gives, the old lists
// stay as they were, and Prefix finds every prefix's routes.
func TestRoutesPatchProperty(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 7))
		prefixes := 1 + rng.IntN(1200)
		model := map[RouteKey]PlanRoute{}
		for range rng.IntN(3 * prefixes) {
			r := randomRoute(rng, prefixes)
			model[r.Key()] = r
		}
		cur := RoutesOf(sortedRoutes(model))
		for step := range 30 {
			label := fmt.Sprintf("seed %d step %d", seed, step)
			before, beforeList := cur, cur.Slice()
			next := maps.Clone(model)
			ups := map[RouteKey]PlanRoute{}
			rems := map[RouteKey]bool{}
			size := 1 + rng.IntN(8)
			if rng.IntN(10) == 0 {
				size = rng.IntN(3 * prefixes) // large batches: splits, empty lists
			}
			keys := slices.SortedFunc(maps.Keys(model), CompareRouteKeys)
			for range size {
				if rng.IntN(2) == 0 && len(keys) > 0 {
					k := keys[rng.IntN(len(keys))]
					if _, ok := next[k]; ok && !ups[k].Prefix.IsValid() {
						delete(next, k)
						rems[k] = true
					}
					continue
				}
				r := randomRoute(rng, prefixes)
				if rems[r.Key()] {
					continue
				}
				ups[r.Key()] = r
				next[r.Key()] = r
			}
			remove := slices.SortedFunc(maps.Keys(rems), CompareRouteKeys)
			cur = cur.Patch(sortedRoutes(ups), remove)
			model = next
			checkChunks(t, label, cur)
			want := sortedRoutes(model)
			// cmp.Diff only to show a difference: it is slow on long lists.
			if got := cur.Slice(); !slices.EqualFunc(want, got, PlanRoute.Equal) {
				t.Fatalf("%s: routes (-model +Patch):\n%s", label, cmp.Diff(want, got, routeOpts))
			}
			if got := before.Slice(); !slices.EqualFunc(beforeList, got, PlanRoute.Equal) {
				t.Fatalf("%s: the old list changed:\n%s", label, cmp.Diff(beforeList, got, routeOpts))
			}
			if cur.Len() != len(model) {
				t.Fatalf("%s: Len %d, want %d", label, cur.Len(), len(model))
			}
			wantUps, wantRems := modelDiff(beforeList, want)
			for _, from := range []struct {
				name string
				r    Routes
			}{{"patched", before}, {"rebuilt", RoutesOf(slices.Clone(beforeList))}} {
				ups, rems := from.r.Diff(cur)
				if !slices.EqualFunc(wantUps, ups, PlanRoute.Equal) || !slices.Equal(wantRems, rems) {
					t.Fatalf("%s: Diff from the %s list: upserts (-want +got):\n%s\nremovals (-want +got):\n%s", label, from.name,
						cmp.Diff(wantUps, ups, routeOpts), cmp.Diff(wantRems, rems, routeOpts))
				}
			}
			if ups, rems := cur.Diff(cur); ups != nil || rems != nil {
				t.Fatalf("%s: Diff of a list with itself: %d upserts, %d removals", label, len(ups), len(rems))
			}
			for range 20 {
				p := randomRoute(rng, prefixes).Prefix
				var of []PlanRoute
				for _, r := range want {
					if r.Prefix == p {
						of = append(of, r)
					}
				}
				if diff := cmp.Diff(of, cur.Prefix(p), routeOpts); diff != "" {
					t.Fatalf("%s: Prefix(%s) (-want +got):\n%s", label, p, diff)
				}
			}
		}
	}
}

// modelDiff is what Diff returns, from the whole lists: the routes of b not
// in a or different there, and the keys of a not in b, in key order.
func modelDiff(a, b []PlanRoute) ([]PlanRoute, []RouteKey) {
	in := func(l []PlanRoute) map[RouteKey]PlanRoute {
		m := map[RouteKey]PlanRoute{}
		for _, r := range l {
			m[r.Key()] = r
		}
		return m
	}
	am, bm := in(a), in(b)
	var ups []PlanRoute
	var rems []RouteKey
	for _, r := range b {
		if o, ok := am[r.Key()]; !ok || !o.Equal(r) {
			ups = append(ups, r)
		}
	}
	for _, r := range a {
		if _, ok := bm[r.Key()]; !ok {
			rems = append(rems, r.Key())
		}
	}
	return ups, rems
}

// TestRoutesSharing: a patch shares the chunks it does not touch, and
// copies only the one it changes.
func TestRoutesSharing(t *testing.T) {
	var list []PlanRoute
	for i := range 10 * routeChunk {
		list = append(list, PlanRoute{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, byte(i / 256), byte(i % 256)}), 32), Peer: "p"})
	}
	r := RoutesOf(list)
	if len(r.chunks) != 10 {
		t.Fatalf("%d chunks of %d routes, want 10", len(r.chunks), r.Len())
	}
	up := list[5*routeChunk+3]
	up.LocalPref = 200
	next := r.Patch([]PlanRoute{up}, nil)
	var copied []int
	for i := range next.chunks {
		if &next.chunks[i][0] != &r.chunks[i][0] {
			copied = append(copied, i)
		}
	}
	if diff := cmp.Diff([]int{5}, copied); diff != "" {
		t.Errorf("chunks copied (-want +got):\n%s", diff)
	}
	if !r.Same(r.Patch(nil, nil)) || r.Same(next) || r.Equal(next) || !next.Equal(RoutesOf(next.Slice())) {
		t.Error("Same or Equal wrong")
	}
}

func TestRoutesJSON(t *testing.T) {
	r := RoutesOf([]PlanRoute{
		{Prefix: netip.MustParsePrefix("198.51.100.1/32"), Peer: "a"},
		{Prefix: netip.MustParsePrefix("198.51.100.1/32"), Peer: "b", Communities: []uint32{1}},
	})
	b, err := json.Marshal(NodePlan{Routes: r})
	if err != nil {
		t.Fatal(err)
	}
	var back NodePlan
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r.Slice(), back.Routes.Slice(), routeOpts); diff != "" {
		t.Errorf("routes after JSON (-want +got):\n%s", diff)
	}
}

// BenchmarkRoutesDiff is the difference between a node's 60,000 routes and
// the same with one route added: from the list Patch made it from (shared
// chunks skipped), and from an equal list that shares nothing (every route
// compared, as Diff did for every list).
func BenchmarkRoutesDiff(b *testing.B) {
	var list []PlanRoute
	for i := range 60000 {
		list = append(list, PlanRoute{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32), Peer: "spine-a"})
	}
	r := RoutesOf(list)
	next := r.Patch([]PlanRoute{{Prefix: netip.MustParsePrefix("10.0.100.1/31"), Peer: "spine-a"}}, nil)
	for _, tc := range []struct {
		name string
		from Routes
	}{{"patched", r}, {"shares-nothing", RoutesOf(slices.Clone(list))}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if ups, _ := tc.from.Diff(next); len(ups) != 1 {
					b.Fatalf("%d upserts, want 1", len(ups))
				}
			}
		})
	}
}
