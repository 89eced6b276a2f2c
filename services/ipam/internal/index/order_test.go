package index

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

func allocEvent(tenant, id, pool string, rev int64, labels map[string]string) ipam.Event {
	a := &ipam.Allocation{Tenant: tenant, ID: id, Pool: pool, Owner: id, OwnerLabels: selector.SetOf(labels)}
	return ipam.Event{Ref: ipam.RefOf(ipam.KindAllocation, tenant, id), Value: a, Rev: rev}
}

// wantPage is what Allocations must return, computed from x.allocs by
// brute force.
func wantPage(x *Index, q AllocationQuery) AllocationPage {
	x.mu.Lock()
	var ids []string
	for id, e := range x.allocs {
		if (q.Tenant == "" || e.a.Tenant == q.Tenant) && (q.Pool == "" || e.a.Pool == q.Pool) && id > q.After {
			ids = append(ids, id)
		}
	}
	x.mu.Unlock()
	// IDs sort as "tenant/id" strings do.
	slices.Sort(ids)
	var p AllocationPage
	examined := 0
	for _, id := range ids {
		if len(p.Items) == q.Limit || (q.Budget > 0 && examined == q.Budget) {
			p.More = true
			break
		}
		examined++
		p.Last = id
		e := x.allocs[id]
		if q.Match == nil || q.Match(e.a) {
			p.Items = append(p.Items, AllocationAt{Allocation: e.a, Rev: e.rev})
		}
	}
	return p
}

func pageIDs(p AllocationPage) string {
	var ids []string
	for _, it := range p.Items {
		ids = append(ids, fmt.Sprintf("%s/%s@%d", it.Allocation.Tenant, it.Allocation.ID, it.Rev))
	}
	return fmt.Sprintf("%v last=%s more=%v", ids, p.Last, p.More)
}

// Pages from the ID orders equal a brute-force sort of the index's
// allocations, through random allocations, updates, moves between pools,
// deletions, re-creations under a deleted ID and reloads, and walks with
// page tokens list every allocation once.
func TestAllocationsPagesMatchSortedIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 18))
	tenants := []string{"a", "a-b", "b", "c0", "c"} // "a-b" sorts between "a/…" IDs and "b/…"
	pools := []string{"p1", "p2", "p3"}
	x := New()
	rev := int64(1)
	state := map[string]ipam.Event{} // the live allocations, as the model
	for step := range 4000 {
		rev++
		tn, id := tenants[rng.IntN(len(tenants))], fmt.Sprintf("o%03d", rng.IntN(300))
		ref := ipam.RefOf(ipam.KindAllocation, tn, id)
		var ev ipam.Event
		if _, ok := state[ref.ID]; ok && rng.IntN(3) == 0 {
			ev = ipam.Event{Ref: ref, Rev: rev, Deleted: true}
			delete(state, ref.ID)
		} else {
			ev = allocEvent(tn, id, pools[rng.IntN(len(pools))], rev, map[string]string{"app": fmt.Sprint(rng.IntN(20))})
			state[ref.ID] = ev
		}
		x.Apply([]ipam.Event{ev}, 0)
		if step%1000 == 999 { // a reload, in key order
			var load []ipam.Event
			for _, k := range slices.Sorted(func(yield func(string) bool) {
				for k := range state {
					if !yield(k) {
						return
					}
				}
			}) {
				load = append(load, state[k])
			}
			x.Replace(load, rev)
		}
		if step%50 != 0 {
			continue
		}
		for range 5 {
			q := AllocationQuery{Limit: 1 + rng.IntN(40)}
			if rng.IntN(2) == 0 {
				q.Tenant = tenants[rng.IntN(len(tenants))]
			}
			if rng.IntN(2) == 0 {
				q.Pool = pools[rng.IntN(len(pools))]
			}
			if rng.IntN(2) == 0 {
				q.Budget = 1 + rng.IntN(60)
				q.Match = func(a *ipam.Allocation) bool { v, _ := a.OwnerLabels.Get("app"); return v == "3" }
			}
			if rng.IntN(2) == 0 {
				q.After = tenants[rng.IntN(len(tenants))] + "/" + fmt.Sprintf("o%03d", rng.IntN(300))
			}
			want, got := wantPage(x, q), x.Allocations(q)
			if diff := cmp.Diff(pageIDs(want), pageIDs(got)); diff != "" {
				t.Fatalf("step %d, query %+v (-want +got):\n%s", step, q, diff)
			}
		}
	}

	// A walk with a small page and budget lists every allocation once.
	var walked []string
	q := AllocationQuery{Limit: 7, Budget: 11}
	for {
		p := x.Allocations(q)
		for _, it := range p.Items {
			walked = append(walked, it.Allocation.Tenant+"/"+it.Allocation.ID)
		}
		if !p.More {
			break
		}
		q.After = p.Last
	}
	want := slices.Sorted(func(yield func(string) bool) {
		for k := range state {
			if !yield(k) {
				return
			}
		}
	})
	if diff := cmp.Diff(want, walked); diff != "" {
		t.Fatalf("walk (-want +got):\n%s", diff)
	}
}

// A page from far into a large tenant, with a pool or a filter matching
// nothing, examines no more than the page or its budget.
func TestAllocationsPageCostIsBounded(t *testing.T) {
	x := New()
	var load []ipam.Event
	for i := range 20000 {
		load = append(load, allocEvent("t", fmt.Sprintf("o%06d", i), fmt.Sprintf("p%d", i%10), 2, nil))
	}
	x.Replace(load, 2)
	calls := 0
	p := x.Allocations(AllocationQuery{Tenant: "t", After: "t/o010000", Limit: 100, Budget: 500, Match: func(*ipam.Allocation) bool { calls++; return false }})
	if calls != 500 || len(p.Items) != 0 || !p.More || p.Last != "t/o010500" {
		t.Fatalf("filter matching nothing: %d examined, %d items, more %v, last %s; want 500, 0, true, t/o010500", calls, len(p.Items), p.More, p.Last)
	}
	calls = 0
	p = x.Allocations(AllocationQuery{Tenant: "t", Pool: "p3", After: "t/o010000", Limit: 100, Match: func(*ipam.Allocation) bool { calls++; return true }})
	if calls != 100 || len(p.Items) != 100 || p.Items[0].Allocation.ID != "o010003" {
		t.Fatalf("pool p3 after o010000: %d examined, first %v; want 100 from o010003", calls, pageIDs(p))
	}
}

// The orders cost 16 bytes per allocation: one string header, sharing the
// allocs map's key, plus the allocator's rounding of each order's slice to
// a size class and a few hundred bytes per tenant and pool. Here 1,000
// allocations per tenant and pool, as the scale benchmark's million has.
func TestAllocationOrderMemory(t *testing.T) {
	const n = 200_000
	x := New()
	load := make([]ipam.Event, 0, n)
	for i := range n {
		tn := fmt.Sprintf("t%02d", i%20)
		load = append(load, allocEvent(tn, fmt.Sprintf("o%07d", i), fmt.Sprintf("p%d", (i/20)%10), 2, nil))
	}
	slices.SortFunc(load, func(a, b ipam.Event) int { return strings.Compare(a.Ref.ID, b.Ref.ID) })
	x.Replace(load, 2)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	with := heap()
	x.mu.Lock()
	x.orders, x.orderTenants = nil, nil
	x.mu.Unlock()
	without := heap()
	per := float64(int64(with)-int64(without)) / n
	t.Logf("ID orders: %.1f bytes per allocation (%d allocations, 20 tenants × 10 pools)", per, n)
	if per > 17 {
		t.Fatalf("ID orders cost %.1f bytes per allocation, want ≤ 17", per)
	}
	runtime.KeepAlive(x)
}

// BenchmarkAllocationsPage times a page of 100 at 1k, 100k and 1M
// allocations (a tenant per 10,000 allocations, 10 pools): every tenant's
// from a token in the middle, one tenant's, one tenant's in one pool. A
// page's cost must not grow with the index (`go test -run '^$' -bench
// AllocationsPage ./services/ipam/internal/index/`).
func BenchmarkAllocationsPage(b *testing.B) {
	for _, n := range []int{1_000, 100_000, 1_000_000} {
		x := New()
		tenants := max(1, n/10_000)
		load := make([]ipam.Event, 0, n)
		for i := range n {
			load = append(load, allocEvent(fmt.Sprintf("t%03d", i%tenants), fmt.Sprintf("o%07d", i), fmt.Sprintf("p%d", (i/tenants)%10), 2, nil))
		}
		slices.SortFunc(load, func(a, b ipam.Event) int { return strings.Compare(a.Ref.ID, b.Ref.ID) })
		x.Replace(load, 2)
		clear(load)
		mid := fmt.Sprintf("t%03d/o%07d", tenants/2, n/2)
		for _, q := range []struct {
			name string
			q    AllocationQuery
		}{
			{"all", AllocationQuery{After: mid}},
			{"tenant", AllocationQuery{Tenant: "t000", After: mid}},
			{"pool", AllocationQuery{Tenant: "t000", Pool: "p3", After: "t000/"}},
		} {
			if q.name == "tenant" {
				q.q.After = fmt.Sprintf("t000/o%07d", n/2)
			}
			q.q.Limit, q.q.Budget = 100, 10_000
			b.Run(fmt.Sprintf("%s/%dk", q.name, n/1000), func(b *testing.B) {
				for b.Loop() {
					if p := x.Allocations(q.q); len(p.Items) != 100 {
						b.Fatalf("page of %d", len(p.Items))
					}
				}
			})
		}
	}
}
