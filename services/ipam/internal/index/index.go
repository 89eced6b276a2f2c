// Package index is one IPAM replica's in-memory view of the state in etcd:
// pools with their free addresses, allocations, address claims and holds. It
// is fed by the store's watch, by the replica's own commits and by the
// current values read when a commit conflicts; every object is kept at the
// newest revision seen, so the order those arrive in does not matter.
//
// It holds no allocation rules: package assign decides, reading the index
// through State under the index's lock (see Index.Decide), and the index
// keeps what a decision being committed takes (its free addresses, its
// sharing key, its quota count) until it is settled. Finding a free address
// costs O(log n) in the number of free fragments of one pool, never a scan
// of etcd or of a pool address by address. Plans are proposals: the store
// commits them only if every object they read is unchanged, so a stale
// index costs a retry, never a double allocation.
//
// It imports no storage and no transport.
package index

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/assign"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Index is the in-memory state of one replica. It is safe for concurrent use.
type Index struct {
	mu sync.Mutex

	pools     map[string]*poolEntry
	poolOrder []*ipam.Pool // sorted by name; nil when stale
	// allocs and claims hold their entries by value: a pointer each would
	// cost a million small objects more at a million allocations.
	allocs map[string]allocEntry // by "tenant/id"
	claims map[netip.Addr]claimEntry
	holds  map[string]*holdEntry // by "tenant/id"
	// heldIn holds, per pool name, the addresses of its claims kept for a
	// released owner, in order: a full pool reclaims the lowest without
	// scanning its claims (see poolView.LowestHeldN).
	heldIn  map[string]*heldSet
	sharing map[assign.ShareKey]map[netip.Addr]struct{}
	// reserved holds the addresses plans being committed have taken, with
	// their reservation: another decision that needs one waits for it (see
	// assign.Pending).
	reserved map[netip.Addr]*Reservation
	// inFlight holds, per sharing key, the reservation being committed that
	// allocates under it; another decision under the key waits for it (see
	// assign.Pending).
	inFlight   map[assign.ShareKey]*Reservation
	tombstones map[ipam.Ref]int64
	expiry     expiryHeap
	quotas     map[string]uint64      // tenant -> max addresses (0: none)
	tenantRevs map[string]int64       // tenant -> revision of its quota
	guardRevs  map[ipam.Ref]int64     // sharing-key and tenant guards -> revision
	used       map[string]uint64      // tenant -> addresses held
	adding     map[string]uint64      // tenant -> addresses of its plans in flight
	heldAddrs  map[string]uint64      // tenant -> addresses kept in its holds
	groups     map[string]*groupEntry // global groups by "pool/group"
	progress   int64
	wake       chan struct{}

	// creations holds, per tenant, the live allocations that keep their
	// creation record, for CreationRecords (audit.go).
	creations map[string]*creationSet

	// orders holds, per tenant and pool, the allocations' IDs in order,
	// for Allocations (order.go); orderTenants the tenants in order (nil
	// when stale). loading is set while Replace applies a load.
	orders       map[string]map[string]*idOrder
	orderTenants []string
	loading      bool
}

type allocEntry struct {
	a   *ipam.Allocation
	rev int64
}

type claimEntry struct {
	c   *ipam.Claim
	rev int64
}

type holdEntry struct {
	h   *ipam.Hold
	rev int64
}

// New returns an empty index.
func New() *Index {
	return &Index{
		pools:      make(map[string]*poolEntry),
		allocs:     make(map[string]allocEntry),
		claims:     make(map[netip.Addr]claimEntry),
		holds:      make(map[string]*holdEntry),
		heldIn:     make(map[string]*heldSet),
		sharing:    make(map[assign.ShareKey]map[netip.Addr]struct{}),
		reserved:   make(map[netip.Addr]*Reservation),
		inFlight:   make(map[assign.ShareKey]*Reservation),
		tombstones: make(map[ipam.Ref]int64),
		quotas:     make(map[string]uint64),
		tenantRevs: make(map[string]int64),
		guardRevs:  make(map[ipam.Ref]int64),
		used:       make(map[string]uint64),
		adding:     make(map[string]uint64),
		heldAddrs:  make(map[string]uint64),
		groups:     make(map[string]*groupEntry),
		creations:  make(map[string]*creationSet),
		orders:     make(map[string]map[string]*idOrder),
		wake:       make(chan struct{}, 1),
	}
}

// Apply records events. An event no newer than what the index holds for its
// object, or no newer than the watch's progress, is ignored. progress, if
// positive, is a revision up to which the caller has delivered every event
// (a watch's position); tombstones up to it are then dropped.
func (x *Index) Apply(events []ipam.Event, progress int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, ev := range events {
		x.apply(ev)
	}
	if progress > x.progress {
		x.progress = progress
		for r, rev := range x.tombstones {
			if rev <= progress {
				delete(x.tombstones, r)
			}
		}
	}
}

// Known reports whether the index already holds r at revision rev or
// newer, so the watch need not decode it again.
func (x *Index) Known(r ipam.Ref, rev int64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return rev <= x.rev(r)
}

// WaitProgress waits until the watch has delivered every event up to rev,
// or ctx is done; it reports whether it caught up.
func (x *Index) WaitProgress(ctx context.Context, rev int64) bool {
	for {
		if x.Progress() >= rev {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Progress returns the revision up to which the watch has delivered events.
func (x *Index) Progress() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.progress
}

// Replace swaps the whole state for events loaded at revision rev, for the
// first load and for a reload after the watch fell too far behind. Plans in
// flight keep their reservations (buildPool leaves reserved addresses out).
func (x *Index) Replace(events []ipam.Event, rev int64) {
	fresh := New()
	// Sized up front: growing maps of a million entries by doubling costs
	// a load a tenth of its time.
	var nAllocs, nClaims int
	for _, ev := range events {
		switch ev.Ref.Kind {
		case ipam.KindAllocation:
			nAllocs++
		case ipam.KindClaim:
			nClaims++
		}
	}
	fresh.allocs, fresh.claims = make(map[string]allocEntry, nAllocs), make(map[netip.Addr]claimEntry, nClaims)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.pools, x.poolOrder, x.allocs, x.claims, x.holds = fresh.pools, nil, fresh.allocs, fresh.claims, fresh.holds
	x.sharing, x.tombstones, x.expiry, x.progress = fresh.sharing, fresh.tombstones, nil, 0
	x.heldIn, x.groups, x.creations = fresh.heldIn, fresh.groups, fresh.creations
	x.orders, x.orderTenants, x.loading = fresh.orders, nil, true
	x.quotas, x.tenantRevs, x.used, x.guardRevs, x.heldAddrs = fresh.quotas, fresh.tenantRevs, fresh.used, fresh.guardRevs, fresh.heldAddrs
	// Pools first: a pool built before its claims takes each as it comes
	// (addClaim), one built after them would scan every claim (buildPool),
	// and pools' keys sort after claims'.
	for _, ev := range events {
		if ev.Ref.Kind == ipam.KindPool {
			x.apply(ev)
		}
	}
	for _, ev := range events {
		if ev.Ref.Kind != ipam.KindPool {
			x.apply(ev)
		}
	}
	x.finishLoad()
	x.progress = rev
}

// liveRev returns the revision of r if the index holds it, else 0: the
// precondition a decision that read r needs.
func (x *Index) liveRev(r ipam.Ref) int64 {
	if _, dead := x.tombstones[r]; dead {
		return 0
	}
	return x.rev(r)
}

// rev returns the revision the index holds for r (a tombstone's for
// deleted objects), 0 if none.
func (x *Index) rev(r ipam.Ref) int64 {
	switch r.Kind {
	case ipam.KindPool:
		if e, ok := x.pools[r.ID]; ok {
			return e.rev
		}
	case ipam.KindAllocation:
		if e, ok := x.allocs[r.ID]; ok {
			return e.rev
		}
	case ipam.KindClaim:
		if a, err := netip.ParseAddr(r.ID); err == nil {
			if e, ok := x.claims[a]; ok {
				return e.rev
			}
		}
	case ipam.KindHold:
		if e, ok := x.holds[r.ID]; ok {
			return e.rev
		}
	case ipam.KindTenant:
		if rev, ok := x.tenantRevs[r.ID]; ok {
			return rev
		}
	case ipam.KindShare, ipam.KindTenantGuard:
		if rev, ok := x.guardRevs[r]; ok {
			return rev
		}
	case ipam.KindGlobalGroup:
		if e, ok := x.groups[r.ID]; ok {
			return e.rev
		}
	}
	return x.tombstones[r]
}

func (x *Index) apply(ev ipam.Event) {
	// An event at or below the watch's progress is old news: the watch
	// delivered that revision and every later one up to progress, so the
	// index already holds the object as it was then or since. Applying it
	// could bring back an object deleted since, once its tombstone is
	// pruned (a conflict's read, or a commit, applied after the watch
	// delivered a later delete).
	if ev.Rev <= x.progress || ev.Rev <= x.rev(ev.Ref) {
		return
	}
	if ev.Value == nil || ev.Deleted {
		x.tombstones[ev.Ref] = ev.Rev
	} else {
		delete(x.tombstones, ev.Ref)
	}
	switch ev.Ref.Kind {
	case ipam.KindPool:
		x.poolOrder = nil
		if p, ok := ev.Value.(*ipam.Pool); ok && !ev.Deleted {
			x.pools[ev.Ref.ID] = x.buildPool(p, ev.Rev)
		} else {
			delete(x.pools, ev.Ref.ID)
		}
	case ipam.KindAllocation:
		var was, is *ipam.Allocation
		if old, ok := x.allocs[ev.Ref.ID]; ok {
			was = old.a
			x.used[old.a.Tenant] -= uint64(len(old.a.Addrs))
			x.forgetCreation(old.a)
		}
		if a, ok := ev.Value.(*ipam.Allocation); ok && !ev.Deleted {
			is = a
			x.used[a.Tenant] += uint64(len(a.Addrs))
			x.keepCreation(a)
			x.allocs[ev.Ref.ID] = allocEntry{a: a, rev: ev.Rev}
			if !a.ExpireTime.IsZero() {
				x.pushExpiry(a.ExpireTime, ev.Ref, ev.Rev)
			}
		} else {
			delete(x.allocs, ev.Ref.ID)
		}
		x.orderUpdate(ev.Ref.ID, was, is)
	case ipam.KindClaim:
		addr, err := netip.ParseAddr(ev.Ref.ID)
		if err != nil {
			return
		}
		x.dropClaim(addr)
		if c, ok := ev.Value.(*ipam.Claim); ok && !ev.Deleted {
			x.addClaim(addr, c, ev.Rev)
		}
	case ipam.KindHold:
		if old, ok := x.holds[ev.Ref.ID]; ok {
			t := old.h.Allocation.Tenant
			if x.heldAddrs[t] -= uint64(len(old.h.Allocation.Addrs)); x.heldAddrs[t] == 0 {
				delete(x.heldAddrs, t)
			}
		}
		if h, ok := ev.Value.(*ipam.Hold); ok && !ev.Deleted {
			x.holds[ev.Ref.ID] = &holdEntry{h: h, rev: ev.Rev}
			x.heldAddrs[h.Allocation.Tenant] += uint64(len(h.Allocation.Addrs))
			x.pushExpiry(h.ExpireTime, ev.Ref, ev.Rev)
		} else {
			delete(x.holds, ev.Ref.ID)
		}
	case ipam.KindTenant:
		if t, ok := ev.Value.(*ipam.Tenant); ok && !ev.Deleted {
			x.quotas[ev.Ref.ID] = t.MaxAddresses
			x.tenantRevs[ev.Ref.ID] = ev.Rev
		} else {
			delete(x.quotas, ev.Ref.ID)
			delete(x.tenantRevs, ev.Ref.ID)
		}
	case ipam.KindGlobalGroup:
		if g, ok := ev.Value.(*ipam.GlobalGroup); ok && !ev.Deleted {
			x.groups[ev.Ref.ID] = &groupEntry{g: g, rev: ev.Rev}
		} else {
			delete(x.groups, ev.Ref.ID)
		}
	case ipam.KindShare, ipam.KindTenantGuard:
		if ev.Value != nil && !ev.Deleted {
			x.guardRevs[ev.Ref] = ev.Rev
		} else {
			delete(x.guardRevs, ev.Ref)
		}
	}
}

// Held returns the number of addresses kept in a tenant's holds.
func (x *Index) Held(tenant string) uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.heldAddrs[tenant]
}

// Used returns the number of addresses a tenant's allocations hold.
func (x *Index) Used(tenant string) uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.used[tenant]
}

func (x *Index) addClaim(addr netip.Addr, c *ipam.Claim, rev int64) {
	x.claims[addr] = claimEntry{c: c, rev: rev}
	if c.HeldFor != "" {
		h := x.heldIn[c.Pool]
		if h == nil {
			h = newHeldSet()
			x.heldIn[c.Pool] = h
		}
		h.of(addr).Put(addr)
	}
	if p, ok := x.pools[c.Pool]; ok {
		p.take(addr)
		p.count(addr, true)
	}
	if k, ok := assign.ClaimShareKey(c); ok {
		if x.sharing[k] == nil {
			x.sharing[k] = make(map[netip.Addr]struct{})
		}
		x.sharing[k][addr] = struct{}{}
	}
}

func (x *Index) dropClaim(addr netip.Addr) {
	e, ok := x.claims[addr]
	if !ok {
		return
	}
	delete(x.claims, addr)
	c := e.c
	if h := x.heldIn[c.Pool]; c.HeldFor != "" && h != nil {
		h.of(addr).Take(addr)
		if h.empty() {
			delete(x.heldIn, c.Pool)
		}
	}
	p, hasPool := x.pools[c.Pool]
	if hasPool {
		p.count(addr, false)
	}
	if k, ok := assign.ClaimShareKey(c); ok {
		delete(x.sharing[k], addr)
		if len(x.sharing[k]) == 0 {
			delete(x.sharing, k)
		}
	}
	if _, busy := x.reserved[addr]; busy {
		return
	}
	if hasPool {
		p.give(addr)
	}
}

// sortedPools returns the pools in name order.
func (x *Index) sortedPools() []*ipam.Pool {
	if x.poolOrder == nil {
		x.poolOrder = make([]*ipam.Pool, 0, len(x.pools))
		for _, e := range x.pools {
			x.poolOrder = append(x.poolOrder, e.pool)
		}
		slices.SortFunc(x.poolOrder, func(a, b *ipam.Pool) int { return strings.Compare(a.Name, b.Name) })
	}
	return x.poolOrder
}

// poolOf returns the pool whose addresses include addr.
func (x *Index) poolOf(addr netip.Addr) *poolEntry {
	for _, p := range x.sortedPools() {
		if e := x.pools[p.Name]; e.space.Contains(addr) {
			return e
		}
	}
	return nil
}

// Allocation returns the allocation with the given "tenant/id" and its
// revision, if the index has it.
func (x *Index) Allocation(id string) (*ipam.Allocation, int64, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.allocs[id]
	if !ok {
		return nil, 0, false
	}
	return e.a, e.rev, true
}

// Pool returns a pool and its revision, if the index has it.
func (x *Index) Pool(name string) (*ipam.Pool, int64, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.pools[name]
	if !ok {
		return nil, 0, false
	}
	return e.pool, e.rev, true
}
