package planner

import (
	"fmt"
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// checkAffected checks Affected for a change from before to after of one
// allocation among others: its deltas applied to the old plans give the new
// plans, they equal Diff of the two, and the owners it returns equal
// L2Owners of the new state. It returns the deltas.
func checkAffected(t *testing.T, label string, in *Input, others []*ipam.Allocation, before, after *ipam.Allocation, inBefore bool) map[string]*Delta {
	t.Helper()
	withOne := func(a *ipam.Allocation) []*ipam.Allocation {
		all := append([]*ipam.Allocation(nil), others...)
		if a != nil {
			all = append(all, a)
		}
		return all
	}
	inB, inA := withAllocs(in, withOne(before)), withAllocs(in, withOne(after))
	owners0 := L2Owners(inB)
	plansB := Plans(inB, owners0)

	state := inA
	if inBefore {
		state = inB
	}
	deltas, touched := Affected(state, before, after, owners0)

	owners1 := maps.Clone(owners0)
	for a, o := range touched {
		if o == "" {
			delete(owners1, a)
		} else {
			owners1[a] = o
		}
	}
	if diff := cmp.Diff(L2Owners(withOwners(inA, owners0)), owners1); diff != "" {
		t.Fatalf("%s: owners after (-L2Owners +Affected):\n%s", label, diff)
	}
	plansA := Plans(inA, owners1)
	if diff := cmp.Diff(plansA, applyAll(plansB, deltas), planOpts()); diff != "" {
		t.Fatalf("%s: plans after (-Plans +applied):\n%s", label, diff)
	}
	for name, p := range plansA {
		want := Diff(plansB[name], p)
		if want.Empty() {
			want = nil
		}
		if diff := cmp.Diff(want, deltas[name], planOpts()); diff != "" {
			t.Fatalf("%s: delta of %s (-Diff +Affected):\n%s", label, name, diff)
		}
	}
	return deltas
}

// TestAffectedProperty: on random inputs, for allocations, releases and
// updates, Affected agrees with recomputing everything.
func TestAffectedProperty(t *testing.T) {
	for seed := range uint64(seeds) {
		g := newGen(t, seed)
		nodes := 1 + int(seed%12)
		in := g.input(nodes, 2+int(seed%40))
		all := in.Allocations
		i := g.rng.IntN(len(all))
		others := append(append([]*ipam.Allocation(nil), all[:i]...), all[i+1:]...)
		cur := all[i]
		var before, after *ipam.Allocation
		var kind string
		switch g.rng.IntN(4) {
		case 0:
			kind, after = "allocate", cur
		case 1:
			kind, before = "release", cur
		case 2:
			kind, before = "update endpoints", cur
			c := *cur
			c.TrafficPolicy = ipam.TrafficLocal
			c.EndpointNodes = nil
			for range g.rng.IntN(4) {
				c.EndpointNodes = append(c.EndpointNodes, fmt.Sprintf("n%03d", g.rng.IntN(nodes+1)))
			}
			after = &c
		default:
			kind, before = "update labels and policy", cur
			c := *cur
			c.OwnerLabels = selector.SetOf(labels("app", g.pick(apps()...)))
			c.TrafficPolicy = ipam.TrafficCluster
			after = &c
		}
		checkAffected(t, fmt.Sprintf("seed %d, %s", seed, kind), in, others, before, after, g.p(0.5))
	}
}

func TestAffectedExamples(t *testing.T) {
	in := bgpInput(t)
	in.BGP[0].AggregationLength = 24
	in.BGP[0].Peers = []string{"r2"}
	in.L2 = []*ipam.L2Advertisement{{Tenant: tenant, ID: "l2"}}
	a1 := in.Allocations[0]
	a2 := alloc("a2", "web", "192.0.2.2")

	t.Run("release keeps an aggregate another allocation needs", func(t *testing.T) {
		d := checkAffected(t, "release", in, []*ipam.Allocation{a1}, a2, nil, true)
		for name, x := range d {
			if len(x.RemoveRoutes)+len(x.UpsertRoutes) > 0 {
				t.Errorf("%s: routes changed: %+v", name, x)
			}
		}
	})
	t.Run("release of the last one withdraws it", func(t *testing.T) {
		d := checkAffected(t, "release", in, nil, a1, nil, false)
		for _, name := range []string{"n1", "n2"} {
			if d[name] == nil || len(d[name].RemoveRoutes) != 1 {
				t.Errorf("%s: %+v, want the /24 withdrawn", name, d[name])
			}
		}
	})
	t.Run("a global member whose endpoints vanish withdraws", func(t *testing.T) {
		g := alloc("g1", "web", "192.0.2.77")
		g.GlobalGroup, g.EndpointNodes = "web/g", []string{"n1"}
		gone := *g
		gone.EndpointNodes = nil
		d := checkAffected(t, "endpoints gone", in, nil, g, &gone, true)
		for _, name := range []string{"n1", "n2"} {
			if d[name] == nil || len(d[name].RemoveRoutes) != 1 {
				t.Errorf("%s: %+v, want the route withdrawn", name, d[name])
			}
		}
		back := gone
		back.GlobalBackup, back.EndpointNodes = true, []string{"n2"}
		d = checkAffected(t, "endpoints back, as a backup", in, nil, &gone, &back, true)
		for _, name := range []string{"n1", "n2"} {
			if d[name] == nil || len(d[name].UpsertRoutes) != 1 || d[name].UpsertRoutes[0].MED != ipam.BackupMED {
				t.Errorf("%s: %+v, want the route announced as a backup", name, d[name])
			}
		}
	})
	t.Run("sharing an address keeps its owner", func(t *testing.T) {
		shared := alloc("a0", "web", "192.0.2.1")
		d := checkAffected(t, "share", in, []*ipam.Allocation{a1}, nil, shared, false)
		// Only the PlanL2's allocation name changes (a0 sorts first).
		for name, x := range d {
			if len(x.RemoveL2) > 0 || len(x.UpsertL2) != 1 || x.UpsertL2[0].Allocation != "t1/a0" {
				t.Errorf("%s: %+v", name, x)
			}
		}
	})
	t.Run("endpoints moving away move the owner", func(t *testing.T) {
		before := local(alloc("a9", "web", "192.0.2.9"), "n1")
		after := local(alloc("a9", "web", "192.0.2.9"), "n2")
		d := checkAffected(t, "endpoints", in, []*ipam.Allocation{a1}, before, after, true)
		if d["n1"] == nil || len(d["n1"].RemoveL2) != 1 || d["n2"] == nil || len(d["n2"].UpsertL2) != 1 {
			t.Errorf("deltas %+v %+v, want the address moved from n1 to n2", d["n1"], d["n2"])
		}
	})
	t.Run("nothing to do", func(t *testing.T) {
		if d, o := Affected(in, nil, nil, nil); len(d) != 0 || len(o) != 0 {
			t.Errorf("Affected(nil, nil) = %v, %v", d, o)
		}
	})
}

// TestDiffApply: Apply(old, Diff(old, new)) is new, and leaves old intact.
func TestDiffApply(t *testing.T) {
	for seed := range uint64(100) {
		in1 := newGen(t, seed).input(8, 30)
		in2 := newGen(t, seed+1000).input(8, 30)
		p1, p2 := Plans(in1, L2Owners(in1)), Plans(in2, L2Owners(in2))
		for _, name := range []string{"n000", "n001", "n002", "n003", "n007", "missing"} {
			old, new := p1[name], p2[name]
			var oldCopy ipam.NodePlan
			if old != nil {
				oldCopy = ipam.NodePlan{Peers: append([]ipam.PlanPeer(nil), old.Peers...),
					Routes: ipam.RoutesOf(old.Routes.Slice()), L2: append([]ipam.PlanL2(nil), old.L2...)}
			}
			got := Apply(old, Diff(old, new))
			want := new
			if want == nil {
				want = &ipam.NodePlan{}
			}
			if diff := cmp.Diff(want, got, planOpts()); diff != "" {
				t.Fatalf("seed %d %s: Apply(Diff) (-want +got):\n%s", seed, name, diff)
			}
			if old != nil {
				if diff := cmp.Diff(&oldCopy, old, planOpts()); diff != "" {
					t.Fatalf("seed %d %s: Apply changed its input:\n%s", seed, name, diff)
				}
			}
			if !Diff(new, new).Empty() {
				t.Fatalf("seed %d %s: Diff of a plan with itself is not empty", seed, name)
			}
		}
	}
	if d := Diff(nil, nil); !d.Empty() {
		t.Errorf("Diff(nil, nil) = %+v", d)
	}
	var nilDelta *Delta
	if !nilDelta.Empty() {
		t.Error("nil delta not empty")
	}
}
