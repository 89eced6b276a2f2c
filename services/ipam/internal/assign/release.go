package assign

import (
	"net/netip"
	"slices"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// current returns the allocation "tenant/id", refusing if it is not there
// or, with rev positive (an etag), not at that revision.
func current(st State, tenant, id string, rev int64) (*ipam.Allocation, error) {
	a, cur, ok := st.Allocation(tenant + "/" + id)
	if !ok {
		return nil, ipam.Refuse(ipam.ErrNotFound, "allocation tenants/%s/allocations/%s not found", tenant, id)
	}
	if rev > 0 && rev != cur {
		return nil, ipam.Refuse(ipam.ErrEtagMismatch, "allocation changed since etag was read")
	}
	return a, nil
}

// Release decides ending the allocation "tenant/id". With hold > 0 its
// addresses are kept for the owner until now+hold (a global group's and
// shared ones are not). rev, if positive, is the revision the caller
// expects the allocation to be at (an etag).
func Release(st State, tenant, id string, rev int64, hold time.Duration, now time.Time) (*Decision, error) {
	a, err := current(st, tenant, id, rev)
	if err != nil {
		return nil, err
	}
	b := newBuilder(st, &Decision{Before: a})
	b.del(ipam.RefOf(ipam.KindAllocation, tenant, id))
	if rec := a.CreationRecord(); rec != nil {
		// The record of its creation leaves with the allocation, for the
		// log (no condition: audit IDs are unique).
		b.d.Change.Puts = append(b.d.Change.Puts, ipam.Put{Ref: ipam.Ref{Kind: ipam.KindAudit, ID: rec.Key()}, Value: rec, Alone: true})
	}
	var held []netip.Addr
	for _, addr := range a.Addrs {
		c, ok := st.Claim(addr)
		if !ok {
			// Not in the state: commit only if it is really gone, so that
			// a stale view cannot leave a claim behind.
			b.cond(ipam.ClaimRef(addr))
			continue
		}
		n := *c
		n.Holders = slices.DeleteFunc(slices.Clone(c.Holders), func(h ipam.Holder) bool { return h.Is(c, tenant, id) })
		switch {
		case len(n.Holders) > 0:
			b.put(ipam.ClaimRef(addr), &n)
		case hold > 0 && n.Group == "":
			// A global group's address is never held: its last member
			// leaving frees it.
			n.HeldFor = id
			b.put(ipam.ClaimRef(addr), &n)
			held = append(held, addr)
		default:
			b.del(ipam.ClaimRef(addr))
		}
	}
	if len(held) > 0 {
		kept := *a
		kept.Addrs = held
		kept.Created = nil // in the log now
		b.put(ipam.RefOf(ipam.KindHold, tenant, id), &ipam.Hold{Allocation: kept, ExpireTime: now.Add(hold)})
	}
	return b.d, nil
}

// Renew decides pushing back the expiry of "tenant/id" to now+ttl (ttl 0:
// the allocation's own TTL).
func Renew(st State, tenant, id string, rev int64, ttl time.Duration, now time.Time) (*Decision, error) {
	cur, err := current(st, tenant, id, rev)
	if err != nil {
		return nil, err
	}
	if ttl == 0 {
		ttl = cur.TTL
	}
	if ttl == 0 {
		return nil, ipam.Refuse(ipam.ErrNoLongerExpiring, "allocation has no ttl to renew; pass one")
	}
	a := *cur
	a.TTL = ttl
	a.ExpireTime = now.Add(ttl)
	a.UpdateTime = now
	b := newBuilder(st, &Decision{Alloc: &a, Before: cur})
	b.put(ipam.RefOf(ipam.KindAllocation, tenant, id), &a)
	return b.d, nil
}

// Expire decides freeing an allocation or hold whose time ran out. It
// returns nil when ref is no longer due (renewed, released or gone).
func Expire(st State, ref ipam.Ref, now time.Time) *Decision {
	switch ref.Kind {
	case ipam.KindAllocation:
		a, rev, ok := st.Allocation(ref.ID)
		if !ok || a.ExpireTime.IsZero() || a.ExpireTime.After(now) {
			return nil
		}
		d, err := Release(st, a.Tenant, a.ID, rev, 0, now)
		if err != nil {
			return nil
		}
		return d
	case ipam.KindHold:
		h, ok := st.Hold(ref.ID)
		if !ok || h.ExpireTime.After(now) {
			return nil
		}
		b := newBuilder(st, &Decision{Before: &h.Allocation})
		b.endHold(h, nil)
		return b.d
	}
	return nil
}

// Update decides changing the metadata of "tenant/id": next is the whole
// allocation after the change (addresses, pool and owner untouched by the
// caller). A change of ports is checked against the address's other
// sharers.
func Update(st State, tenant, id string, rev int64, next *ipam.Allocation, now time.Time) (*Decision, error) {
	cur, err := current(st, tenant, id, rev)
	if err != nil {
		return nil, err
	}
	a := *next
	a.Tenant, a.ID, a.UID, a.Owner = cur.Tenant, cur.ID, cur.UID, cur.Owner
	a.Addrs, a.Pool, a.CreateTime, a.UpdateTime = cur.Addrs, cur.Pool, cur.CreateTime, now
	a.Created = cur.Created
	a.ExpireTime = cur.ExpireTime
	if a.TTL != cur.TTL {
		a.ExpireTime = time.Time{}
		if a.TTL > 0 {
			a.ExpireTime = now.Add(a.TTL)
		}
	}
	b := newBuilder(st, &Decision{Alloc: &a, Before: cur})
	if !slices.Equal(a.Ports, cur.Ports) {
		for _, addr := range a.Addrs {
			c, ok := st.Claim(addr)
			if !ok {
				continue
			}
			n := *c
			n.Holders = slices.Clone(c.Holders)
			for i, h := range n.Holders {
				if h.Is(c, tenant, id) {
					n.Holders[i].Ports = a.Ports
				} else if n.Group == "" && PortsClash(h.Ports, a.Ports) {
					// A global group's members are in different clusters:
					// their ports never clash.
					return nil, ipam.Refuse(ipam.ErrAddressInUse, "the new ports clash with another owner sharing %s", addr)
				}
			}
			b.put(ipam.ClaimRef(addr), &n)
		}
	}
	b.put(ipam.RefOf(ipam.KindAllocation, tenant, id), &a)
	return b.d, nil
}
