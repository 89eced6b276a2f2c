package index

import (
	"net/netip"
	"slices"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// PlanRelease plans ending the allocation "tenant/id". With hold > 0 its
// addresses are kept for the owner until now+hold. rev, if positive, is the
// revision the caller expects the allocation to be at (an etag).
func (x *Index) PlanRelease(tenant, id string, rev int64, hold time.Duration, now time.Time) (*Plan, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.allocs[tenant+"/"+id]
	if !ok {
		return nil, ipam.Refuse(ipam.ErrNotFound, "allocation tenants/%s/allocations/%s not found", tenant, id)
	}
	if rev > 0 && rev != e.rev {
		return nil, ipam.Refuse(ipam.ErrEtagMismatch, "allocation changed since etag was read")
	}
	a := e.a
	b := &builder{x: x, plan: &Plan{Before: a}, claims: make(map[netip.Addr]*ipam.Claim)}
	b.del(RefOf(ipam.KindAllocation, tenant, id))
	if rec := a.CreationRecord(); rec != nil {
		// The record of its creation leaves with the allocation, for the
		// log (no condition: audit IDs are unique).
		b.plan.Change.Puts = append(b.plan.Change.Puts, ipam.Put{Ref: ipam.Ref{Kind: ipam.KindAudit, ID: rec.Key()}, Value: rec, Alone: true})
	}
	var held []netip.Addr
	for _, addr := range a.Addrs {
		c, ok := x.claims[addr]
		if !ok {
			// Not in the index: commit only if it is really gone, so that a
			// stale index cannot leave a claim behind.
			b.cond(ClaimRef(addr))
			continue
		}
		n := *c.c
		n.Holders = slices.DeleteFunc(slices.Clone(c.c.Holders), func(h ipam.Holder) bool { return h.Is(c.c, tenant, id) })
		switch {
		case len(n.Holders) > 0:
			b.put(ClaimRef(addr), &n)
		case hold > 0 && n.Group == "":
			// A global group's address is never held: its last member
			// leaving frees it.
			n.HeldFor = id
			b.put(ClaimRef(addr), &n)
			held = append(held, addr)
		default:
			b.del(ClaimRef(addr))
		}
	}
	if len(held) > 0 {
		kept := *a
		kept.Addrs = held
		kept.Created = nil // in the log now
		b.put(RefOf(ipam.KindHold, tenant, id), &ipam.Hold{Allocation: kept, ExpireTime: now.Add(hold)})
	}
	return b.plan, nil
}

// PlanRenew plans pushing back the expiry of "tenant/id" to now+ttl (ttl 0:
// the allocation's own TTL).
func (x *Index) PlanRenew(tenant, id string, rev int64, ttl time.Duration, now time.Time) (*Plan, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.allocs[tenant+"/"+id]
	if !ok {
		return nil, ipam.Refuse(ipam.ErrNotFound, "allocation tenants/%s/allocations/%s not found", tenant, id)
	}
	if rev > 0 && rev != e.rev {
		return nil, ipam.Refuse(ipam.ErrEtagMismatch, "allocation changed since etag was read")
	}
	if ttl == 0 {
		ttl = e.a.TTL
	}
	if ttl == 0 {
		return nil, ipam.Refuse(ipam.ErrNoLongerExpiring, "allocation has no ttl to renew; pass one")
	}
	a := *e.a
	a.TTL = ttl
	a.ExpireTime = now.Add(ttl)
	a.UpdateTime = now
	b := &builder{x: x, plan: &Plan{Alloc: &a, Before: e.a}}
	b.put(RefOf(ipam.KindAllocation, tenant, id), &a)
	return b.plan, nil
}

// PlanExpire plans freeing an allocation or hold whose time ran out. It
// returns nil when ref is no longer due (renewed, released or gone).
func (x *Index) PlanExpire(ref ipam.Ref, now time.Time) *Plan {
	x.mu.Lock()
	switch ref.Kind {
	case ipam.KindAllocation:
		e, ok := x.allocs[ref.ID]
		x.mu.Unlock()
		if !ok || e.a.ExpireTime.IsZero() || e.a.ExpireTime.After(now) {
			return nil
		}
		p, err := x.PlanRelease(e.a.Tenant, e.a.ID, e.rev, 0, now)
		if err != nil {
			return nil
		}
		return p
	case ipam.KindHold:
		defer x.mu.Unlock()
		e, ok := x.holds[ref.ID]
		if !ok || e.h.ExpireTime.After(now) {
			return nil
		}
		b := &builder{x: x, plan: &Plan{Before: &e.h.Allocation}, claims: make(map[netip.Addr]*ipam.Claim)}
		b.endHold(e.h, nil)
		return b.plan
	}
	x.mu.Unlock()
	return nil
}

// PlanUpdate plans changing the metadata of "tenant/id": next is the whole
// allocation after the change (addresses, pool and owner untouched by the
// caller). A change of ports is checked against the address's other sharers.
func (x *Index) PlanUpdate(tenant, id string, rev int64, next *ipam.Allocation, now time.Time) (*Plan, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.allocs[tenant+"/"+id]
	if !ok {
		return nil, ipam.Refuse(ipam.ErrNotFound, "allocation tenants/%s/allocations/%s not found", tenant, id)
	}
	if rev > 0 && rev != e.rev {
		return nil, ipam.Refuse(ipam.ErrEtagMismatch, "allocation changed since etag was read")
	}
	a := *next
	a.Tenant, a.ID, a.UID, a.Owner = e.a.Tenant, e.a.ID, e.a.UID, e.a.Owner
	a.Addrs, a.Pool, a.CreateTime, a.UpdateTime = e.a.Addrs, e.a.Pool, e.a.CreateTime, now
	a.Created = e.a.Created
	a.ExpireTime = e.a.ExpireTime
	if a.TTL != e.a.TTL {
		a.ExpireTime = time.Time{}
		if a.TTL > 0 {
			a.ExpireTime = now.Add(a.TTL)
		}
	}
	b := &builder{x: x, plan: &Plan{Alloc: &a, Before: e.a}, claims: make(map[netip.Addr]*ipam.Claim)}
	if !slices.Equal(a.Ports, e.a.Ports) {
		for _, addr := range a.Addrs {
			c, ok := x.claims[addr]
			if !ok {
				continue
			}
			n := *c.c
			n.Holders = slices.Clone(c.c.Holders)
			for i, h := range n.Holders {
				if h.Is(c.c, tenant, id) {
					n.Holders[i].Ports = a.Ports
				} else if n.Group == "" && ipam.PortsClash(h.Ports, a.Ports) {
					// A global group's members are in different clusters:
					// their ports never clash.
					return nil, ipam.Refuse(ipam.ErrAddressInUse, "the new ports clash with another owner sharing %s", addr)
				}
			}
			b.put(ClaimRef(addr), &n)
		}
	}
	b.put(RefOf(ipam.KindAllocation, tenant, id), &a)
	return b.plan, nil
}
