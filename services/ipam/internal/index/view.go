package index

import (
	"iter"
	"net/netip"

	"github.com/beaconlb/beacon/services/ipam/internal/assign"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// view is the index as assign reads it: lookups with the index's lock
// held by the caller (see Index.Decide). It decides nothing.
type view struct{ x *Index }

var _ assign.State = view{}

func (v view) Allocation(id string) (*ipam.Allocation, int64, bool) {
	e, ok := v.x.allocs[id]
	if !ok {
		return nil, 0, false
	}
	return e.a, e.rev, true
}

func (v view) Hold(id string) (*ipam.Hold, bool) {
	e, ok := v.x.holds[id]
	if !ok {
		return nil, false
	}
	return e.h, true
}

func (v view) HoldsOf(tenant string) []*ipam.Hold {
	var out []*ipam.Hold
	for _, e := range v.x.holds {
		if e.h.Allocation.Tenant == tenant {
			out = append(out, e.h)
		}
	}
	return out
}

func (v view) Claim(addr netip.Addr) (*ipam.Claim, bool) {
	e, ok := v.x.claims[addr]
	if !ok {
		return nil, false
	}
	return e.c, true
}

func (v view) SharedUnder(k assign.ShareKey) iter.Seq[netip.Addr] {
	return func(yield func(netip.Addr) bool) {
		for addr := range v.x.sharing[k] {
			if !yield(addr) {
				return
			}
		}
	}
}

func (v view) Rev(r ipam.Ref) int64 { return v.x.liveRev(r) }

func (v view) Pools() []*ipam.Pool { return v.x.sortedPools() }

func (v view) Pool(name string) (assign.Pool, bool) {
	e, ok := v.x.pools[name]
	if !ok {
		return nil, false
	}
	return e, true
}

func (v view) PoolOf(addr netip.Addr) (assign.Pool, bool) {
	if e := v.x.poolOf(addr); e != nil {
		return e, true
	}
	return nil, false
}

func (v view) Group(key string) (*ipam.GlobalGroup, bool) {
	e, ok := v.x.groups[key]
	if !ok {
		return nil, false
	}
	return e.g, true
}

func (v view) Tenant(tenant string) assign.TenantUse {
	x := v.x
	return assign.TenantUse{Quota: x.quotas[tenant], Used: x.used[tenant], Adding: x.adding[tenant], Held: x.heldAddrs[tenant]}
}

func (v view) Reserved(addr netip.Addr) (<-chan struct{}, bool) {
	p, ok := v.x.reserved[addr]
	if !ok {
		return nil, false
	}
	return p.done, true
}

func (v view) Reservations() iter.Seq2[netip.Addr, <-chan struct{}] {
	return func(yield func(netip.Addr, <-chan struct{}) bool) {
		for addr, p := range v.x.reserved {
			if !yield(addr, p.done) {
				return
			}
		}
	}
}

func (v view) InFlight(k assign.ShareKey) (<-chan struct{}, bool) {
	p, ok := v.x.inFlight[k]
	if !ok {
		return nil, false
	}
	return p.done, true
}

// A poolEntry is a pool as assign reads it: its free lists, and the
// addresses kept in it for released owners (in its index's heldIn).

func (e *poolEntry) Spec() *ipam.Pool                                      { return e.pool }
func (e *poolEntry) HasFamily(f ipam.Family) bool                          { return e.hasFamily(f) }
func (e *poolEntry) Contains(addr netip.Addr) bool                         { return e.space.Contains(addr) }
func (e *poolEntry) LowestFree(f ipam.Family) (netip.Addr, bool)           { return e.lowest(f) }
func (e *poolEntry) LowestFreeN(f ipam.Family, n int) ([]netip.Addr, bool) { return e.lowestN(f, n) }

func (e *poolEntry) LowestHeldN(f ipam.Family, n int) ([]netip.Addr, bool) {
	h := e.x.heldIn[e.pool.Name]
	if h == nil {
		return nil, false
	}
	return h.lowestN(f, n)
}
