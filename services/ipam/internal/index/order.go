package index

import (
	"slices"
	"sort"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// The allocations in ID order, for listings (Allocations): per tenant and
// pool, an idOrder of their "tenant/id" strings (the allocs map's own keys,
// so the order adds a 16-byte string header per allocation and no string
// data). A tenant's listing merges its pools' orders; a pool filter reads
// one of them.

// idOrder is one tenant's allocations in one pool, in ID order: a sorted
// base and a sorted run of IDs added since, merged into the base once the
// run outgrows a 32nd of it (so an added ID costs an amortized O(1) copy
// and a binary search, never a sort of the tenant). A removed ID stays
// until that merge: listings skip IDs the index no longer holds in this
// pool, and an ID that comes back finds itself still in place.
type idOrder struct {
	base  []string
	added []string
	dead  int // IDs in base or added that the index no longer holds here
}

// orderKey names an idOrder.
type orderKey struct{ tenant, pool string }

// orderUpdate keeps the orders in step with x.allocs, after id's entry
// changed from old to next (nil: none).
func (x *Index) orderUpdate(id string, old, next *ipam.Allocation) {
	if old != nil && (next == nil || old.Pool != next.Pool) {
		x.orderRemove(old)
	}
	if next != nil && (old == nil || old.Pool != next.Pool) {
		x.orderAdd(id, next)
	}
}

func (o *idOrder) has(id string) bool {
	_, inBase := slices.BinarySearch(o.base, id)
	if inBase {
		return true
	}
	_, inAdded := slices.BinarySearch(o.added, id)
	return inAdded
}

func (o *idOrder) size() int { return len(o.base) + len(o.added) }

// orderAdd records that the index holds allocation a under id.
func (x *Index) orderAdd(id string, a *ipam.Allocation) {
	k := orderKey{a.Tenant, a.Pool}
	pools := x.orders[a.Tenant]
	if pools == nil {
		pools = make(map[string]*idOrder)
		x.orders[a.Tenant] = pools
		x.orderTenants = nil
	}
	o := pools[a.Pool]
	if o == nil {
		o = &idOrder{}
		pools[a.Pool] = o
	}
	if x.loading {
		o.base = append(o.base, id) // sorted and trimmed by finishLoad
		return
	}
	if o.has(id) {
		o.dead-- // it was removed and is back
		return
	}
	i, _ := slices.BinarySearch(o.added, id)
	o.added = slices.Insert(o.added, i, id)
	if len(o.added) > max(64, len(o.base)/32) {
		x.compact(k, o)
	}
}

// orderRemove records that the index no longer holds allocation a under
// its ID (deleted, or replaced by a version in another pool).
func (x *Index) orderRemove(a *ipam.Allocation) {
	k := orderKey{a.Tenant, a.Pool}
	o := x.orders[a.Tenant][a.Pool]
	if o == nil {
		return
	}
	o.dead++
	if o.dead > 64 && o.dead > o.size()/2 {
		x.compact(k, o)
	}
}

// live reports whether the index holds id in the order's pool.
func (x *Index) live(id string, k orderKey) bool {
	e, ok := x.allocs[id]
	return ok && e.a.Pool == k.pool && e.a.Tenant == k.tenant
}

// compact merges an order's added run into its base, dropping dead IDs,
// into a slice of exactly the size needed.
func (x *Index) compact(k orderKey, o *idOrder) {
	n := 0
	for _, id := range o.base {
		if x.live(id, k) {
			n++
		}
	}
	for _, id := range o.added {
		if x.live(id, k) {
			n++
		}
	}
	if n == 0 {
		delete(x.orders[k.tenant], k.pool)
		if len(x.orders[k.tenant]) == 0 {
			delete(x.orders, k.tenant)
			x.orderTenants = nil
		}
		return
	}
	merged := make([]string, 0, n)
	i, j := 0, 0
	for i < len(o.base) || j < len(o.added) {
		var id string
		if j == len(o.added) || (i < len(o.base) && o.base[i] < o.added[j]) {
			id, i = o.base[i], i+1
		} else {
			id, j = o.added[j], j+1
		}
		if x.live(id, k) {
			merged = append(merged, id)
		}
	}
	o.base, o.added, o.dead = merged, nil, 0
}

// finishLoad ends a Replace: each order's base, appended in the load's
// order (etcd's key order, so normally sorted already), is sorted,
// rid of duplicates and dead IDs, and trimmed to its size.
func (x *Index) finishLoad() {
	x.loading = false
	for t, pools := range x.orders {
		for p, o := range pools {
			if !slices.IsSorted(o.base) {
				slices.Sort(o.base)
			}
			n := len(o.base)
			if o.base = slices.Compact(o.base); o.dead > 0 || len(o.base) < n {
				x.compact(orderKey{t, p}, o) // a load that repeats or deletes an allocation
			} else if cap(o.base) > len(o.base) {
				o.base = append(make([]string, 0, len(o.base)), o.base...)
			}
		}
	}
}

// tenantsInOrder returns the tenants that have allocations, in the order
// of their IDs' prefix "tenant/" (the order of the IDs themselves).
func (x *Index) tenantsInOrder() []string {
	if x.orderTenants == nil {
		x.orderTenants = make([]string, 0, len(x.orders))
		for t := range x.orders {
			x.orderTenants = append(x.orderTenants, t)
		}
		slices.SortFunc(x.orderTenants, func(a, b string) int { return strings.Compare(a+"/", b+"/") })
	}
	return x.orderTenants
}

// AllocationQuery selects a page of allocations (see Index.Allocations).
type AllocationQuery struct {
	// Tenant is the tenant whose allocations are listed; "" lists every
	// tenant's.
	Tenant string
	// Pool, if set, lists only the allocations from that pool.
	Pool string
	// ID, "tenant/id", if set, lists only that allocation (an owner names
	// one per tenant).
	ID string
	// After is the "tenant/id" the page starts after ("": the start).
	After string
	// Limit is how many allocations the page holds at most.
	Limit int
	// Budget is how many allocations a page examines at most (0: no
	// bound): a filter that matches few of them then returns a short page,
	// and the listing goes on from where it stopped.
	Budget int
	// Match, if set, selects the allocations listed. It runs under the
	// index's lock: it must not call the index.
	Match func(*ipam.Allocation) bool
}

// AllocationPage is a page of allocations in ID order.
type AllocationPage struct {
	Items []AllocationAt
	// Last is the ID of the last allocation the page examined (listed or
	// not): the next page starts after it.
	Last string
	// More is set when allocations after Last remain.
	More bool
}

// AllocationAt is an allocation and the revision it was stored at.
type AllocationAt struct {
	Allocation *ipam.Allocation
	Rev        int64
}

// orderCursor walks one idOrder from a position.
type orderCursor struct {
	k    orderKey
	o    *idOrder
	i, j int // next in base, next in added
}

func newCursor(k orderKey, o *idOrder, after string) *orderCursor {
	c := &orderCursor{k: k, o: o}
	c.i = sort.SearchStrings(o.base, after)
	if c.i < len(o.base) && o.base[c.i] == after {
		c.i++
	}
	c.j = sort.SearchStrings(o.added, after)
	if c.j < len(o.added) && o.added[c.j] == after {
		c.j++
	}
	return c
}

// peek returns the cursor's next ID (live or not); ok is false at its end.
func (c *orderCursor) peek() (string, bool) {
	switch {
	case c.i < len(c.o.base) && (c.j == len(c.o.added) || c.o.base[c.i] < c.o.added[c.j]):
		return c.o.base[c.i], true
	case c.j < len(c.o.added):
		return c.o.added[c.j], true
	}
	return "", false
}

func (c *orderCursor) advance() {
	if c.i < len(c.o.base) && (c.j == len(c.o.added) || c.o.base[c.i] < c.o.added[c.j]) {
		c.i++
	} else {
		c.j++
	}
}

// Allocations returns a page of the allocations the index holds, in ID
// order, from the ID after q.After: at most q.Limit of those q.Match
// selects, having examined at most q.Budget.
//
// A page costs a binary search in each order it reads (one per pool of
// each tenant it reaches; one with a pool) and the allocations it
// examines; never a walk from the start of a tenant, whatever the size of
// the index. A filter the orders do not answer (anything but tenant and
// pool) examines the allocations it skips: at most q.Budget per page.
func (x *Index) Allocations(q AllocationQuery) AllocationPage {
	x.mu.Lock()
	defer x.mu.Unlock()
	if q.ID != "" {
		return x.allocationByID(q)
	}
	tenants := []string{q.Tenant}
	if q.Tenant == "" {
		tenants = x.tenantsInOrder()
	}
	var page AllocationPage
	examined := 0
	for _, t := range tenants {
		prefix := t + "/"
		if q.After != "" && q.After >= prefix && !strings.HasPrefix(q.After, prefix) {
			continue // every ID of t sorts before After
		}
		var cursors []*orderCursor
		for p, o := range x.orders[t] {
			if q.Pool == "" || p == q.Pool {
				cursors = append(cursors, newCursor(orderKey{t, p}, o, q.After))
			}
		}
		for {
			// The lowest next ID of the tenant's orders (a pool each).
			var c *orderCursor
			var id string
			for _, cc := range cursors {
				if cid, ok := cc.peek(); ok && (c == nil || cid < id) {
					c, id = cc, cid
				}
			}
			if c == nil {
				break
			}
			if !x.live(id, c.k) {
				c.advance()
				continue
			}
			if len(page.Items) == q.Limit || (q.Budget > 0 && examined == q.Budget) {
				page.More = true
				return page
			}
			c.advance()
			examined++
			page.Last = id
			e := x.allocs[id]
			if q.Match == nil || q.Match(e.a) {
				page.Items = append(page.Items, AllocationAt{Allocation: e.a, Rev: e.rev})
			}
		}
	}
	return page
}

// allocationByID is Allocations for a query naming one allocation.
func (x *Index) allocationByID(q AllocationQuery) AllocationPage {
	var page AllocationPage
	e, ok := x.allocs[q.ID]
	if !ok || q.ID <= q.After || q.Limit == 0 || (q.Tenant != "" && e.a.Tenant != q.Tenant) || (q.Pool != "" && e.a.Pool != q.Pool) {
		return page
	}
	page.Last = q.ID
	if q.Match == nil || q.Match(e.a) {
		page.Items = append(page.Items, AllocationAt{Allocation: e.a, Rev: e.rev})
	}
	return page
}
