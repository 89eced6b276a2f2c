package planner

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// allocsOf indexes a set of allocations as Replan reads them.
func allocsOf(m map[string]*ipam.Allocation) Allocations {
	return Allocations{
		All: maps.Values(m),
		Holding: func(addr netip.Addr) []*ipam.Allocation {
			var out []*ipam.Allocation
			for _, a := range m {
				if slices.Contains(a.Addrs, addr) {
					out = append(out, a)
				}
			}
			return out
		},
	}
}

// TestReplanProperty: on random inputs and random batches of allocations,
// releases and updates, Replan's deltas applied to the plans give Plans of
// the new state with the recorded owners; Owners then gives, for the
// touched addresses, what L2Owners gives, and Replan of those owner changes
// gives Plans with the new owners: the two steps the IPAM takes (plans from
// the recorded owners, then the elected replica records the new owners and
// every replica's plans follow).
func TestReplanProperty(t *testing.T) {
	for seed := range uint64(seeds) {
		g := newGen(t, seed)
		nodes := 1 + int(seed%12)
		in := g.input(nodes, 2+int(seed%40))
		cur := map[string]*ipam.Allocation{}
		for _, a := range in.Allocations {
			cur[a.ID] = a
		}
		recorded := L2Owners(in)
		plans := Plans(in, recorded)
		p := Prepare(in)
		next := len(cur)
		for step := range 12 {
			label := fmt.Sprintf("seed %d step %d", seed, step)
			var ch Change
			for range 1 + g.rng.IntN(3) {
				ids := slices.Sorted(maps.Keys(cur))
				switch k := g.rng.IntN(4); {
				case k == 0 || len(ids) == 0:
					a := g.alloc(fmt.Sprintf("a%04d", next), nodes)
					next++
					cur[a.ID] = a
					ch.Allocations = append(ch.Allocations, a)
				case k == 1:
					a := cur[ids[g.rng.IntN(len(ids))]]
					delete(cur, a.ID)
					ch.Allocations = append(ch.Allocations, a)
				default:
					a := cur[ids[g.rng.IntN(len(ids))]]
					b := *a
					if g.p(0.5) {
						b.TrafficPolicy = ipam.TrafficLocal
						b.EndpointNodes = nil
						for range g.rng.IntN(4) {
							b.EndpointNodes = append(b.EndpointNodes, fmt.Sprintf("n%03d", g.rng.IntN(nodes+1)))
						}
					} else {
						b.OwnerLabels = selector.SetOf(labels("app", g.pick(apps()...)))
						b.TrafficPolicy = ipam.TrafficCluster
					}
					cur[a.ID] = &b
					ch.Allocations = append(ch.Allocations, a, &b)
				}
			}
			now := withAllocs(in, slices.Collect(maps.Values(cur)))
			owner := func(a netip.Addr) string { return recorded[a] }
			ApplyAll(plans, p.Replan(plans, allocsOf(cur), ch, owner))
			if diff := cmp.Diff(Plans(now, recorded), plans, planOpts()); diff != "" {
				t.Fatalf("%s: plans after the allocations (-Plans +Replan):\n%s", label, diff)
			}

			var touched []netip.Addr
			for _, a := range ch.Allocations {
				touched = append(touched, a.Addrs...)
			}
			want := p.Owners(allocsOf(cur), touched, func(a netip.Addr) (string, bool) { o, ok := recorded[a]; return o, ok })
			moved := Change{Owners: map[netip.Addr]string{}}
			updated := maps.Clone(recorded)
			for a, o := range want {
				if recorded[a] == o {
					continue
				}
				moved.Owners[a] = recorded[a]
				if o == "" {
					delete(updated, a)
				} else {
					updated[a] = o
				}
			}
			if diff := cmp.Diff(L2Owners(withOwners(now, recorded)), updated); diff != "" {
				t.Fatalf("%s: owners (-L2Owners +Owners):\n%s", label, diff)
			}
			recorded = updated
			ApplyAll(plans, p.Replan(plans, allocsOf(cur), moved, owner))
			if diff := cmp.Diff(Plans(now, recorded), plans, planOpts()); diff != "" {
				t.Fatalf("%s: plans after the owners (-Plans +Replan):\n%s", label, diff)
			}
		}
	}
}
