package index

import (
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/assign"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// The tests of this package decide on a real index with the real decisions
// of assign, as the allocator does: these helpers are its calls.

func planAllocate(x *Index, req *ipam.Allocation, now time.Time) (*Reservation, error) {
	return x.Decide(func(st assign.State) (*assign.Decision, error) { return assign.Allocate(st, req, now) })
}

func planRelease(x *Index, tenant, id string, rev int64, hold time.Duration, now time.Time) (*Reservation, error) {
	return x.Decide(func(st assign.State) (*assign.Decision, error) {
		return assign.Release(st, tenant, id, rev, hold, now)
	})
}

func planRenew(x *Index, tenant, id string, rev int64, ttl time.Duration, now time.Time) (*Reservation, error) {
	return x.Decide(func(st assign.State) (*assign.Decision, error) { return assign.Renew(st, tenant, id, rev, ttl, now) })
}

func planUpdate(x *Index, tenant, id string, rev int64, next *ipam.Allocation, now time.Time) (*Reservation, error) {
	return x.Decide(func(st assign.State) (*assign.Decision, error) {
		return assign.Update(st, tenant, id, rev, next, now)
	})
}

func planExpire(x *Index, ref ipam.Ref, now time.Time) *Reservation {
	p, _ := x.Decide(func(st assign.State) (*assign.Decision, error) { return assign.Expire(st, ref, now), nil })
	return p
}
