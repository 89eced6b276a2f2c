package index

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/addrspace"
	"github.com/beaconlb/beacon/services/ipam/internal/assign"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// addrCmp compares addresses by value.
var addrCmp = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func pool(t testing.TB, name string, ranges ...string) *ipam.Pool {
	t.Helper()
	p := &ipam.Pool{Name: name, AutoAssign: true}
	for _, s := range ranges {
		r, err := addrspace.ParseRange(s)
		if err != nil {
			t.Fatal(err)
		}
		p.Ranges = append(p.Ranges, r)
	}
	return p
}

func poolEvent(p *ipam.Pool, rev int64) ipam.Event {
	return ipam.Event{Ref: ipam.Ref{Kind: ipam.KindPool, ID: p.Name}, Value: p, Rev: rev}
}

// commit applies a reservation as if etcd committed it at rev.
func commit(t *testing.T, x *Index, p *Reservation, rev int64) {
	t.Helper()
	x.Committed(p, rev)
}

func allocate(t *testing.T, x *Index, owner string, mod ...func(*ipam.Allocation)) *Reservation {
	t.Helper()
	a := &ipam.Allocation{Tenant: "c1", Owner: owner}
	for _, m := range mod {
		m(a)
	}
	p, err := planAllocate(x, a, t0)
	if err != nil {
		t.Fatalf("plan %s: %v", owner, err)
	}
	return p
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestPlanLowestFreeAndReservations(t *testing.T) {
	x := New()
	x.Apply([]ipam.Event{poolEvent(pool(t, "web", "192.0.2.0/30"), 1)}, 1)

	p1 := allocate(t, x, "one")
	p2 := allocate(t, x, "two") // planned while p1 is in flight: must not collide
	if diff := cmp.Diff(addrs("192.0.2.0"), p1.Alloc.Addrs, addrCmp); diff != "" {
		t.Fatalf("first: %s", diff)
	}
	if diff := cmp.Diff(addrs("192.0.2.1"), p2.Alloc.Addrs, addrCmp); diff != "" {
		t.Fatalf("second: %s", diff)
	}
	// p2 fails: its address is free again; p1 commits: its address is taken.
	x.Unreserve(p2)
	commit(t, x, p1, 2)
	p3 := allocate(t, x, "three")
	if diff := cmp.Diff(addrs("192.0.2.1"), p3.Alloc.Addrs, addrCmp); diff != "" {
		t.Fatalf("third: %s", diff)
	}
	// The plan's conditions: allocation, owner's hold and claim absent,
	// pool at its revision.
	want := []ipam.Cond{
		{Ref: ipam.RefOf(ipam.KindAllocation, "c1", ipam.AllocationID("three"))},
		{Ref: ipam.RefOf(ipam.KindHold, "c1", ipam.AllocationID("three"))},
		{Ref: ipam.Ref{Kind: ipam.KindPool, ID: "web"}, Rev: 1},
		{Ref: ipam.ClaimRef(netip.MustParseAddr("192.0.2.1"))},
	}
	if diff := cmp.Diff(want, p3.Change.Conds, addrCmp); diff != "" {
		t.Fatalf("conds (-want +got):\n%s", diff)
	}
	// The owner of p1 gets its allocation back.
	again := allocate(t, x, "one")
	if again.Existing == nil || again.Existing.Addrs[0] != netip.MustParseAddr("192.0.2.0") {
		t.Fatalf("idempotent plan = %+v", again)
	}
}

func TestExhaustion(t *testing.T) {
	x := New()
	x.Apply([]ipam.Event{poolEvent(pool(t, "tiny", "192.0.2.7"), 1)}, 1)
	commit(t, x, allocate(t, x, "one"), 2)
	_, err := planAllocate(x, &ipam.Allocation{Tenant: "c1", Owner: "two"}, t0)
	if !errors.Is(err, ipam.ErrPoolExhausted) {
		t.Fatalf("got %v, want ErrPoolExhausted", err)
	}
}

// Events may arrive in any order: claims before their pool (as etcd's key
// order loads them), stale events after newer ones, a put after a delete.
func TestApplyOrderIndependence(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.0")
	claim := ipam.Event{Ref: ipam.ClaimRef(addr), Value: &ipam.Claim{Addr: addr, Pool: "web", Tenant: "c1", Holders: []ipam.Holder{{Allocation: "a1"}}}, Rev: 5}
	x := New()
	x.Apply([]ipam.Event{claim, poolEvent(pool(t, "web", "192.0.2.0/31"), 1)}, 5)
	if got := allocate(t, x, "two").Alloc.Addrs; got[0] != netip.MustParseAddr("192.0.2.1") {
		t.Fatalf("claim loaded before pool not honoured: got %v", got)
	}
	x = New()
	x.Apply([]ipam.Event{poolEvent(pool(t, "web", "192.0.2.0/31"), 1)}, 1)
	x.Apply([]ipam.Event{{Ref: ipam.ClaimRef(addr), Rev: 7}}, 0) // deleted at 7
	x.Apply([]ipam.Event{claim}, 0)                              // stale put at 5
	if got := allocate(t, x, "two").Alloc.Addrs; got[0] != addr {
		t.Fatalf("stale put resurrected a deleted claim: got %v", got)
	}
}

func TestReleaseHoldAndReturn(t *testing.T) {
	x := New()
	x.Apply([]ipam.Event{poolEvent(pool(t, "web", "192.0.2.0/30"), 1)}, 1)
	p := allocate(t, x, "svc")
	commit(t, x, p, 2)
	id := p.Alloc.ID

	rel, err := planRelease(x, "c1", id, 0, time.Minute, t0)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, x, rel, 3)
	// Another owner does not get the held address.
	if got := allocate(t, x, "other").Alloc.Addrs; got[0] == p.Alloc.Addrs[0] {
		t.Fatal("held address handed to another owner")
	}
	x.Unreserve(allocate(t, x, "noop")) // exercise unreserve of an uncommitted plan
	// The owner gets it back, and the hold ends in the same change.
	back := allocate(t, x, "svc")
	if diff := cmp.Diff(p.Alloc.Addrs, back.Alloc.Addrs, addrCmp); diff != "" {
		t.Fatalf("returning owner got other addresses: %s", diff)
	}
	if !containsRef(back.Change.Deletes, ipam.RefOf(ipam.KindHold, "c1", id)) {
		t.Fatal("returning owner's plan does not end the hold")
	}
}

func TestFullPoolReclaimsHeld(t *testing.T) {
	x := New()
	x.Apply([]ipam.Event{poolEvent(pool(t, "web", "192.0.2.0/31"), 1)}, 1)
	a := allocate(t, x, "a")
	commit(t, x, a, 2)
	b := allocate(t, x, "b")
	commit(t, x, b, 3)
	rel, err := planRelease(x, "c1", a.Alloc.ID, 0, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, x, rel, 4)
	c := allocate(t, x, "c")
	if diff := cmp.Diff(a.Alloc.Addrs, c.Alloc.Addrs, addrCmp); diff != "" {
		t.Fatalf("full pool did not reclaim the held address: %s", diff)
	}
	if !containsRef(c.Change.Deletes, ipam.RefOf(ipam.KindHold, "c1", a.Alloc.ID)) {
		t.Fatal("reclaim does not end the hold")
	}
}

func TestSharingPlan(t *testing.T) {
	x := New()
	x.Apply([]ipam.Event{poolEvent(pool(t, "web", "192.0.2.0/30"), 1)}, 1)
	key := func(ports ...uint16) func(*ipam.Allocation) {
		return func(a *ipam.Allocation) {
			a.SharingKey = "k"
			for _, p := range ports {
				a.Ports = append(a.Ports, ipam.Port{Number: p})
			}
		}
	}
	guard := ipam.ShareRef("c1", "k")
	// guardCond returns the plan's condition on the key's guard and whether
	// the plan writes the guard.
	guardCond := func(p *Reservation) (ipam.Cond, bool) {
		var c ipam.Cond
		for _, cc := range p.Change.Conds {
			if cc.Ref == guard {
				c = cc
			}
		}
		for _, w := range p.Change.Puts {
			if w.Ref == guard {
				return c, true
			}
		}
		return c, false
	}
	h := allocate(t, x, "http", key(80))
	if c, writes := guardCond(h); !writes || c.Rev != 0 {
		t.Fatalf("first address under the key: guard written %v with condition %+v, want written, must not exist", writes, c)
	}
	commit(t, x, h, 2)
	d := allocate(t, x, "https", key(443))
	if diff := cmp.Diff(h.Alloc.Addrs, d.Alloc.Addrs, addrCmp); diff != "" {
		t.Fatalf("compatible sharer got another address: %s", diff)
	}
	if _, writes := guardCond(d); writes {
		t.Fatal("a sharer of an existing address wrote the key's guard")
	}
	commit(t, x, d, 3)
	clash := allocate(t, x, "http2", key(80))
	if clash.Alloc.Addrs[0] == h.Alloc.Addrs[0] {
		t.Fatal("clashing sharer got the shared address")
	}
	if c, writes := guardCond(clash); !writes || c.Rev != 2 {
		t.Fatalf("a new address under the key: guard written %v with condition %+v, want written at revision 2", writes, c)
	}
	// Releasing one sharer keeps the address for the other.
	rel, err := planRelease(x, "c1", h.Alloc.ID, 0, 0, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rel.Change.Deletes) != 1 || len(rel.Change.Puts) != 1 {
		t.Fatalf("release of one sharer: deletes %v puts %v", rel.Change.Deletes, rel.Change.Puts)
	}
}

func TestDueExpiry(t *testing.T) {
	x := New()
	x.Apply([]ipam.Event{poolEvent(pool(t, "web", "192.0.2.0/30"), 1)}, 1)
	p := allocate(t, x, "lease", func(a *ipam.Allocation) { a.TTL = time.Minute })
	commit(t, x, p, 2)
	if due, next := x.Due(t0); len(due) != 0 || !next.Equal(t0.Add(time.Minute)) {
		t.Fatalf("Due(t0) = %v, %v", due, next)
	}
	due, _ := x.Due(t0.Add(2 * time.Minute))
	if len(due) != 1 {
		t.Fatalf("nothing due after the ttl: %v", due)
	}
	exp := planExpire(x, due[0], t0.Add(2*time.Minute))
	if exp == nil || len(exp.Change.Deletes) != 2 {
		t.Fatalf("expire plan = %+v", exp)
	}
}

func containsRef(rs []ipam.Ref, r ipam.Ref) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// TestUsageCounts checks the per-pool counters against allocations,
// releases with and without a hold, a reservation in flight and a pool
// rebuilt by an update.
func TestUsageCounts(t *testing.T) {
	x := New()
	web := pool(t, "web", "192.0.2.0/29", "2001:db8::/64")
	x.Apply([]ipam.Event{poolEvent(web, 1)}, 1)
	used := func() map[ipam.Family]uint64 {
		out := map[ipam.Family]uint64{}
		for _, u := range x.Usage("web") {
			out[u.Family] = u.Used
		}
		return out
	}
	check := func(step string, want map[ipam.Family]uint64) {
		t.Helper()
		if diff := cmp.Diff(want, used()); diff != "" {
			t.Fatalf("%s: used (-want +got):\n%s", step, diff)
		}
	}
	check("empty", map[ipam.Family]uint64{ipam.IPv4: 0, ipam.IPv6: 0})

	rev := int64(2)
	dual := func(a *ipam.Allocation) {
		a.Families, a.FamilyPolicy = []ipam.Family{ipam.IPv4, ipam.IPv6}, ipam.RequireDualStack
	}
	for _, owner := range []string{"a", "b", "c"} {
		commit(t, x, allocate(t, x, owner, dual), rev)
		rev++
	}
	inFlight := allocate(t, x, "d") // reserved, not committed: not used
	check("three dual-stack", map[ipam.Family]uint64{ipam.IPv4: 3, ipam.IPv6: 3})
	x.Unreserve(inFlight)

	rel, err := planRelease(x, "c1", ipam.AllocationID("a"), 0, 0, t0)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, x, rel, rev)
	rev++
	check("one released", map[ipam.Family]uint64{ipam.IPv4: 2, ipam.IPv6: 2})

	held, err := planRelease(x, "c1", ipam.AllocationID("b"), 0, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, x, held, rev)
	rev++
	check("one held (still used)", map[ipam.Family]uint64{ipam.IPv4: 2, ipam.IPv6: 2})

	x.Apply([]ipam.Event{poolEvent(pool(t, "web", "192.0.2.0/28", "2001:db8::/64"), rev)}, rev)
	check("pool rebuilt", map[ipam.Family]uint64{ipam.IPv4: 2, ipam.IPv6: 2})
}

// A plan under a sharing key makes the next plan under the key wait until
// it is committed (then they share) or given up (then the next one
// allocates on its own).
func TestPending(t *testing.T) {
	x := New()
	x.Apply([]ipam.Event{poolEvent(pool(t, "web", "192.0.2.0/29"), 1)}, 1)
	keyed := func(port uint16) func(*ipam.Allocation) {
		return func(a *ipam.Allocation) {
			a.SharingKey, a.Ports = "k", []ipam.Port{{Number: port, Protocol: ipam.TCP}}
		}
	}
	first := allocate(t, x, "a", keyed(80))
	_, err := planAllocate(x, &ipam.Allocation{Tenant: "c1", Owner: "b", SharingKey: "k", Ports: []ipam.Port{{Number: 443, Protocol: ipam.TCP}}}, t0)
	var pending *assign.Pending
	if !errors.As(err, &pending) {
		t.Fatalf("second plan under the key: %v, want Pending", err)
	}
	other := allocate(t, x, "c") // no key: not held up
	x.Unreserve(other)

	x.Unreserve(first) // given up
	select {
	case <-pending.Done:
	default:
		t.Fatal("Done not closed when the first plan was given up")
	}
	second := allocate(t, x, "b", keyed(443))
	commit(t, x, second, 2)
	third := allocate(t, x, "d", keyed(8080))
	if diff := cmp.Diff(second.Alloc.Addrs, third.Alloc.Addrs, addrCmp); diff != "" {
		t.Errorf("after the first under the key committed, the next shares its address (-want +got):\n%s", diff)
	}
}

// A tenant's quota is kept at the newest revision seen: the replica's own
// commit applied at once is not undone by an older event the watch
// delivers later.
func TestTenantQuotaNewestWins(t *testing.T) {
	x := New()
	ref := ipam.Ref{Kind: ipam.KindTenant, ID: "c1"}
	x.Apply([]ipam.Event{{Ref: ref, Value: &ipam.Tenant{ID: "c1", MaxAddresses: 3}, Rev: 7}}, 0)
	x.Apply([]ipam.Event{{Ref: ref, Value: &ipam.Tenant{ID: "c1", MaxAddresses: 2}, Rev: 5}}, 5)
	if q := x.quotas["c1"]; q != 3 {
		t.Errorf("quota %d after an older event, want 3", q)
	}
	x.Apply([]ipam.Event{{Ref: ref, Rev: 9, Deleted: true}}, 0)
	x.Apply([]ipam.Event{{Ref: ref, Value: &ipam.Tenant{ID: "c1", MaxAddresses: 3}, Rev: 7}}, 7)
	if q, ok := x.quotas["c1"]; ok {
		t.Errorf("quota %d after the tenant was deleted, want none", q)
	}
}

// Plans in flight count against the quota: a second plan while the first
// is being committed is refused; once the first is given up or committed,
// the count is right again.
func TestTenantQuotaCountsPlansInFlight(t *testing.T) {
	x := New()
	x.Apply([]ipam.Event{
		poolEvent(pool(t, "web", "192.0.2.0/29"), 1),
		{Ref: ipam.Ref{Kind: ipam.KindTenant, ID: "c1"}, Value: &ipam.Tenant{ID: "c1", MaxAddresses: 2}, Rev: 2},
	}, 2)
	first := allocate(t, x, "a")
	if !slices.ContainsFunc(first.Change.Puts, func(p ipam.Put) bool { return p.Ref == ipam.TenantGuardRef("c1") }) ||
		!slices.Contains(first.Change.Conds, ipam.Cond{Ref: ipam.TenantGuardRef("c1")}) {
		t.Fatalf("a plan of a tenant with a quota does not write its guard: %+v", first.Change)
	}
	second := allocate(t, x, "b")
	if _, err := planAllocate(x, &ipam.Allocation{Tenant: "c1", Owner: "c"}, t0); !errors.Is(err, ipam.ErrQuotaExceeded) {
		t.Fatalf("third plan with two in flight and a quota of 2: %v, want ErrQuotaExceeded", err)
	}
	x.Unreserve(second) // given up
	commit(t, x, first, 3)
	third := allocate(t, x, "c")
	if _, err := planAllocate(x, &ipam.Allocation{Tenant: "c1", Owner: "d"}, t0); !errors.Is(err, ipam.ErrQuotaExceeded) {
		t.Fatalf("with one committed and one in flight: %v, want ErrQuotaExceeded", err)
	}
	commit(t, x, third, 4)
	if got := x.Used("c1"); got != 2 {
		t.Errorf("Used = %d, want 2", got)
	}
	if len(x.adding) != 0 {
		t.Errorf("addresses still counted as in flight: %v", x.adding)
	}
}

// Holds count against the quota: at the quota, a new owner's allocation
// ends another owner's hold (earliest expiry first) in the same change,
// rather than let the tenant keep more addresses than its quota.
func TestQuotaEndsHoldsToMakeRoom(t *testing.T) {
	x, a := atQuotaWithHold(t, "192.0.2.0/29")
	if x.heldAddrs["c1"] != 1 || x.Used("c1") != 1 {
		t.Fatalf("after the release: %d held, %d used; want 1 and 1", x.heldAddrs["c1"], x.Used("c1"))
	}
	c := allocate(t, x, "c")
	if !slices.Contains(c.Change.Deletes, ipam.RefOf(ipam.KindHold, "c1", a.Alloc.ID)) ||
		!slices.Contains(c.Change.Deletes, ipam.ClaimRef(a.Alloc.Addrs[0])) {
		t.Fatalf("the allocation at the quota does not end a's hold and free its address: deletes %v", c.Change.Deletes)
	}
	commit(t, x, c, 6)
	if x.heldAddrs["c1"] != 0 || x.Used("c1") != 2 {
		t.Errorf("after c: %d held, %d used; want 0 and 2", x.heldAddrs["c1"], x.Used("c1"))
	}
	// Under the quota, holds are left alone.
	x.Apply([]ipam.Event{{Ref: ipam.Ref{Kind: ipam.KindTenant, ID: "c1"}, Value: &ipam.Tenant{ID: "c1", MaxAddresses: 10}, Rev: 7}}, 7)
	rel, err := planRelease(x, "c1", c.Alloc.ID, 0, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, x, rel, 8)
	d := allocate(t, x, "d")
	if len(d.Change.Deletes) != 0 {
		t.Errorf("under the quota, d's allocation deletes %v", d.Change.Deletes)
	}
}

// At the quota in a full pool, the new owner reclaims a held address; the
// hold it ends is not counted twice, and no other hold is ended for it.
func TestQuotaWithReclaimedHold(t *testing.T) {
	x, a := atQuotaWithHold(t, "192.0.2.0/31")
	c := allocate(t, x, "c")
	if diff := cmp.Diff(a.Alloc.Addrs, c.Alloc.Addrs, addrCmp); diff != "" {
		t.Fatalf("c did not reclaim a's held address (-want +got):\n%s", diff)
	}
	commit(t, x, c, 6)
	if x.heldAddrs["c1"] != 0 || x.Used("c1") != 2 {
		t.Errorf("after c: %d held, %d used; want 0 and 2", x.heldAddrs["c1"], x.Used("c1"))
	}
}

// atQuotaWithHold returns an index with a pool of ranges and tenant c1 at
// its quota of 2: owner a released with an hour's hold (returned, to name
// its address) and b allocated.
func atQuotaWithHold(t *testing.T, ranges string) (*Index, *Reservation) {
	t.Helper()
	x := New()
	x.Apply([]ipam.Event{
		poolEvent(pool(t, "web", ranges), 1),
		{Ref: ipam.Ref{Kind: ipam.KindTenant, ID: "c1"}, Value: &ipam.Tenant{ID: "c1", MaxAddresses: 2}, Rev: 2},
	}, 2)
	a := allocate(t, x, "a")
	commit(t, x, a, 3)
	commit(t, x, allocate(t, x, "b"), 4)
	rel, err := planRelease(x, "c1", a.Alloc.ID, 0, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, x, rel, 5)
	return x, a
}

// A load (Replace) counts each claim in its own pool whatever the order of
// the events (a store's keys put claims before pools), and so does a pool
// that arrives after its claims through the watch.
func TestReplaceCountsClaimsPerPool(t *testing.T) {
	claim := func(addr, pool string, rev int64) ipam.Event {
		a := netip.MustParseAddr(addr)
		return ipam.Event{Ref: ipam.ClaimRef(a), Value: &ipam.Claim{Addr: a, Pool: pool, Tenant: "c1", Holders: []ipam.Holder{{Allocation: "a" + addr}}}, Rev: rev}
	}
	events := []ipam.Event{
		claim("198.51.100.0", "web", 2), claim("198.51.100.1", "web", 3), claim("203.0.113.0", "db", 4),
		poolEvent(pool(t, "db", "203.0.113.0/30"), 1), poolEvent(pool(t, "web", "198.51.100.0/30"), 1),
	}
	type counts struct{ Web, DB []netip.Addr }
	want := counts{Web: addrs("198.51.100.0", "198.51.100.1"), DB: addrs("203.0.113.0")}
	for _, tc := range []struct {
		name string
		load func(x *Index)
	}{
		{"replace", func(x *Index) { x.Replace(events, 4) }},
		{"replace, pools first", func(x *Index) { x.Replace(append(slices.Clone(events[3:]), events[:3]...), 4) }},
		{"watch, pools after claims", func(x *Index) { x.Apply(events[:3], 0); x.Apply(events[3:], 4) }},
	} {
		x := New()
		tc.load(x)
		got := counts{Web: x.ClaimsInPool("web"), DB: x.ClaimsInPool("db")}
		slices.SortFunc(got.Web, netip.Addr.Compare)
		if diff := cmp.Diff(want, got, addrCmp); diff != "" {
			t.Errorf("%s: claims per pool (-want +got):\n%s", tc.name, diff)
		}
		var used []uint64
		for _, name := range []string{"web", "db"} {
			for _, u := range x.Usage(name) {
				used = append(used, u.Used)
			}
		}
		if diff := cmp.Diff([]uint64{2, 1}, used); diff != "" {
			t.Errorf("%s: addresses used in web, db (-want +got):\n%s", tc.name, diff)
		}
		a := &ipam.Allocation{Tenant: "c1", Owner: "next", RequestedPool: "web"}
		p, err := planAllocate(x, a, t0)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := p.Alloc.Addrs; len(got) != 1 || got[0] != netip.MustParseAddr("198.51.100.2") {
			t.Errorf("%s: next address in web %v, want 198.51.100.2", tc.name, got)
		}
	}
}
