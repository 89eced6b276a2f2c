package allocator

import (
	"context"
	"errors"
	"slices"

	"github.com/beaconlb/beacon/services/ipam/internal/index"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// GroupResult is the outcome of a global group write or read.
type GroupResult struct {
	Group *ipam.GlobalGroup
	Rev   int64
}

// CreateGroup stores a new global group on an existing pool. Its request
// record lives with the pools' (adminTenant): groups are the
// administrator's, like pools.
func (a *Allocator) CreateGroup(ctx context.Context, g *ipam.GlobalGroup, meta Meta) (GroupResult, error) {
	ref := ipam.GroupRef(g.Key())
	if r, ok, err := a.replayed(ctx, adminTenant, meta); ok || err != nil {
		if err != nil {
			return GroupResult{}, err
		}
		return a.replayGroup(ctx, ref, r)
	}
	now := a.opts.Now()
	g.UID, g.CreateTime, g.UpdateTime = newID(), now, now
	for range a.opts.MaxAttempts {
		pool, err := a.GetPool(ctx, g.Pool)
		if err != nil {
			return GroupResult{}, err
		}
		if pool.Pool.Deleting {
			return GroupResult{}, ipam.Refuse(ipam.ErrNotAllowed, "pool %q is being deleted", g.Pool)
		}
		ch := ipam.Change{
			Conds: []ipam.Cond{{Ref: ref}, {Ref: ipam.Ref{Kind: ipam.KindPool, ID: g.Pool}, Rev: pool.Rev}},
			Puts:  []ipam.Put{{Ref: ref, Value: g}},
		}
		if err := a.addRequestValue(&ch, adminTenant, meta, replay{Name: ipam.GroupName(g.Key()), Created: true}, g); err != nil {
			return GroupResult{}, err
		}
		rev, fresh, err := a.store.Commit(ctx, ch)
		if errors.Is(err, ipam.ErrConflict) {
			if r, ok, err := a.racedRetry(ctx, adminTenant, meta); ok || err != nil {
				if err != nil {
					return GroupResult{}, err
				}
				return a.replayGroup(ctx, ref, r)
			}
			for _, ev := range fresh {
				if ev.Ref == ref && ev.Value != nil {
					return GroupResult{}, ipam.Refuse(ipam.ErrAlreadyExists, "%s already exists", ipam.GroupName(g.Key()))
				}
			}
			continue // the pool changed: read it again
		}
		if err != nil {
			return GroupResult{}, err
		}
		a.idx.Apply([]ipam.Event{{Ref: ref, Value: g, Rev: rev}}, 0)
		return GroupResult{Group: g, Rev: rev}, nil
	}
	return GroupResult{}, ipam.Refuse(ipam.ErrTooMuchContention, "pool %q kept changing concurrently; retry", g.Pool)
}

func (a *Allocator) replayGroup(ctx context.Context, ref ipam.Ref, r replay) (GroupResult, error) {
	res, err := a.replayConfig(ctx, ref, r)
	if err != nil {
		return GroupResult{}, err
	}
	return GroupResult{Group: res.Value.(*ipam.GlobalGroup), Rev: res.Rev}, nil
}

// Group returns a global group with its addresses and members, from the
// index once it has seen every change etcd had committed when called.
func (a *Allocator) Group(ctx context.Context, key string) (index.GroupState, error) {
	if err := a.catchUp(ctx); err != nil {
		return index.GroupState{}, err
	}
	st, ok := a.idx.Group(key)
	if !ok {
		return index.GroupState{}, ipam.Refuse(ipam.ErrNotFound, "%s not found", ipam.GroupName(key))
	}
	return st, nil
}

// UpdateGroup changes a group's description and grants (next edits a
// copy). Revoking a tenant's grant keeps its member: it stops new joins.
func (a *Allocator) UpdateGroup(ctx context.Context, key string, etagRev int64, next func(*ipam.GlobalGroup), meta Meta) (GroupResult, error) {
	ref := ipam.GroupRef(key)
	if r, ok, err := a.replayed(ctx, adminTenant, meta); ok || err != nil {
		if err != nil {
			return GroupResult{}, err
		}
		return a.replayGroup(ctx, ref, r)
	}
	for range a.opts.MaxAttempts {
		cur, err := a.GetConfig(ctx, ref)
		if errors.Is(err, ipam.ErrNotFound) {
			return GroupResult{}, ipam.Refuse(ipam.ErrNotFound, "%s not found", ipam.GroupName(key))
		}
		if err != nil {
			return GroupResult{}, err
		}
		if etagRev > 0 && etagRev != cur.Rev {
			return GroupResult{}, ipam.Refuse(ipam.ErrEtagMismatch, "%s changed since etag was read", ipam.GroupName(key))
		}
		g := *cur.Value.(*ipam.GlobalGroup)
		next(&g)
		g.UpdateTime = a.opts.Now()
		ch := ipam.Change{Conds: []ipam.Cond{{Ref: ref, Rev: cur.Rev}}, Puts: []ipam.Put{{Ref: ref, Value: &g}}}
		if err := a.addRequestValue(&ch, adminTenant, meta, replay{Name: ipam.GroupName(key)}, &g); err != nil {
			return GroupResult{}, err
		}
		rev, _, err := a.store.Commit(ctx, ch)
		if errors.Is(err, ipam.ErrConflict) {
			if r, ok, err := a.racedRetry(ctx, adminTenant, meta); ok || err != nil {
				if err != nil {
					return GroupResult{}, err
				}
				return a.replayGroup(ctx, ref, r)
			}
			continue
		}
		if err != nil {
			return GroupResult{}, err
		}
		a.idx.Apply([]ipam.Event{{Ref: ref, Value: &g, Rev: rev}}, 0)
		return GroupResult{Group: &g, Rev: rev}, nil
	}
	return GroupResult{}, ipam.Refuse(ipam.ErrTooMuchContention, "%s kept changing concurrently; retry", ipam.GroupName(key))
}

// DeleteGroup deletes a global group that has no members. The delete is
// conditioned on the group's guard as the index saw it: a first member
// joining meanwhile writes the guard (see index.GroupShareRef), so the
// delete conflicts and sees the member when it tries again.
func (a *Allocator) DeleteGroup(ctx context.Context, key string, etagRev int64, meta Meta) error {
	ref := ipam.GroupRef(key)
	if _, ok, err := a.replayed(ctx, adminTenant, meta); ok || err != nil {
		return err
	}
	for range a.opts.MaxAttempts {
		st, err := a.Group(ctx, key)
		if errors.Is(err, ipam.ErrNotFound) {
			if _, ok, rerr := a.racedRetry(ctx, adminTenant, meta); ok || rerr != nil {
				return rerr
			}
		}
		if err != nil {
			return err
		}
		if etagRev > 0 && etagRev != st.Rev {
			return ipam.Refuse(ipam.ErrEtagMismatch, "%s changed since etag was read", ipam.GroupName(key))
		}
		if n := len(st.Members); n > 0 {
			m := st.Members[0]
			return ipam.Refuse(ipam.ErrInUse, "%s has %d member(s), such as %q of tenant %q: release them first", ipam.GroupName(key), n, m.Owner, m.Tenant)
		}
		ch := ipam.Change{
			Conds:   []ipam.Cond{{Ref: ref, Rev: st.Rev}, {Ref: ipam.GroupShareRef(key), Rev: st.GuardRev}},
			Deletes: []ipam.Ref{ref},
		}
		for _, addr := range st.Addrs {
			ch.Conds = append(ch.Conds, ipam.Cond{Ref: ipam.ClaimRef(addr)}) // none: no member
		}
		a.addRequest(&ch, adminTenant, meta, replay{Name: ipam.GroupName(key)})
		rev, fresh, err := a.store.Commit(ctx, ch)
		if errors.Is(err, ipam.ErrConflict) {
			if _, ok, err := a.racedRetry(ctx, adminTenant, meta); ok || err != nil {
				return err
			}
			a.idx.Apply(fresh, 0)
			if werr := a.awaitGuards(ctx, fresh); werr != nil {
				return werr
			}
			continue
		}
		if err == nil {
			a.idx.Apply([]ipam.Event{{Ref: ref, Rev: rev, Deleted: true}}, 0)
		}
		return err
	}
	return ipam.Refuse(ipam.ErrTooMuchContention, "%s kept changing concurrently; retry", ipam.GroupName(key))
}

// refuseL2 refuses a global group's member that one of its tenant's L2
// advertisements would announce: L2 is per segment, and one address
// answered for on several clusters' segments is a conflict, not anycast.
// (The planner never announces a member over L2 either, should an L2
// advertisement selecting it be created later.)
func (a *Allocator) refuseL2(ctx context.Context, req *ipam.Allocation) error {
	if cur, _, ok := a.idx.Allocation(req.Tenant + "/" + ipam.AllocationID(req.Owner)); ok && cur.GlobalGroup == req.GlobalGroup {
		return nil // a member already: its retries and resyncs are answered as before
	}
	st, ok := a.idx.Group(req.GlobalGroup)
	if !ok {
		return nil // assign.Allocate refuses it, after catching up
	}
	pool, _, ok := a.idx.Pool(st.Group.Pool)
	if !ok {
		return nil
	}
	after := ""
	for {
		page, err := a.store.List(ctx, ipam.KindL2Advertisement, req.Tenant+"/", after, a.opts.ListPage, 0)
		if err != nil {
			return err
		}
		for _, ev := range page.Items {
			ad := ev.Value.(*ipam.L2Advertisement)
			all := len(ad.Pools) == 0 && len(ad.PoolSelectors) == 0
			if (all || slices.Contains(ad.Pools, pool.Name) || selector.AnyMatches(ad.PoolSelectors, pool.Labels) && len(ad.PoolSelectors) > 0) &&
				selector.AnyMatchesSet(ad.OwnerSelectors, req.OwnerLabels) {
				return ipam.Refuse(ipam.ErrNotAllowed, "L2 advertisement %q of tenant %q selects pool %q of global group %s: a global address is announced over BGP only (L2 is per segment); narrow the L2 advertisement's pools or owner selectors",
					ad.ID, req.Tenant, pool.Name, ipam.GroupName(req.GlobalGroup))
			}
		}
		if !page.More || len(page.Items) == 0 {
			return nil
		}
		after = page.Items[len(page.Items)-1].Ref.ID
	}
}
