package allocator

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/addrspace"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// adminTenant is the tenant under which pool requests' request_ids live.
const adminTenant = "-"

// PoolResult is the outcome of a pool write.
type PoolResult struct {
	Pool *ipam.Pool
	Rev  int64
	// Released counts allocations a forced delete released.
	Released int
}

// allPools reads every pool at one revision.
func (a *Allocator) allPools(ctx context.Context) ([]ipam.Event, int64, error) {
	var out []ipam.Event
	var rev int64
	after := ""
	for {
		page, err := a.store.List(ctx, ipam.KindPool, "", after, 1000, rev)
		if err != nil {
			return nil, 0, err
		}
		rev = page.Revision
		out = append(out, page.Items...)
		if !page.More || len(page.Items) == 0 {
			return out, rev, nil
		}
		after = page.Items[len(page.Items)-1].Ref.ID
	}
}

// overlapping refuses ranges that overlap a pool other than name.
func overlapping(pools []ipam.Event, name string, ranges []addrspace.Range) error {
	for _, ev := range pools {
		p := ev.Value.(*ipam.Pool)
		if p.Name == name {
			continue
		}
		if r, ok := addrspace.Overlap(p.Ranges, ranges); ok {
			return ipam.Refuse(ipam.ErrPoolOverlap, "%s overlaps pool %q", r, p.Name)
		}
	}
	return nil
}

// CreatePool creates a pool whose fields are already validated.
func (a *Allocator) CreatePool(ctx context.Context, p *ipam.Pool, validateOnly bool, meta Meta) (PoolResult, error) {
	if r, ok, err := a.replayed(ctx, adminTenant, meta); ok || err != nil {
		if err != nil {
			return PoolResult{}, err
		}
		return a.replayPool(ctx, r)
	}
	ref := ipam.Ref{Kind: ipam.KindPool, ID: p.Name}
	for range a.opts.MaxAttempts {
		pools, rev, err := a.allPools(ctx)
		if err != nil {
			return PoolResult{}, err
		}
		for _, ev := range pools {
			if ev.Ref == ref {
				// A retry sent while the first request committed finds
				// the pool: it answers what the first did.
				if r, ok, err := a.racedRetry(ctx, adminTenant, meta); ok || err != nil {
					if err != nil {
						return PoolResult{}, err
					}
					return a.replayPool(ctx, r)
				}
				return PoolResult{}, ipam.Refuse(ipam.ErrAlreadyExists, "pool %q already exists", p.Name)
			}
		}
		if err := overlapping(pools, p.Name, p.Ranges); err != nil {
			return PoolResult{}, err
		}
		now := a.opts.Now()
		np := *p
		np.UID, np.CreateTime, np.UpdateTime = newID(), now, now
		if validateOnly {
			return PoolResult{Pool: &np}, nil
		}
		ch := ipam.Change{
			Conds:     []ipam.Cond{{Ref: ref}},
			Puts:      []ipam.Put{{Ref: ref, Value: &np}},
			Unchanged: []ipam.RangeCond{{From: ipam.Ref{Kind: ipam.KindPool}, To: ipam.Ref{Kind: ipam.KindPool}, Since: rev}},
		}
		a.addRequest(&ch, adminTenant, meta, replay{Name: "pools/" + p.Name, Created: true, Pool: &np})
		crev, _, err := a.store.Commit(ctx, ch)
		if errors.Is(err, ipam.ErrConflict) {
			if r, ok, err := a.racedRetry(ctx, adminTenant, meta); ok || err != nil {
				if err != nil {
					return PoolResult{}, err
				}
				return a.replayPool(ctx, r)
			}
			continue
		}
		if err != nil {
			return PoolResult{}, err
		}
		a.idx.Apply([]ipam.Event{{Ref: ref, Value: &np, Rev: crev}}, 0)
		return PoolResult{Pool: &np, Rev: crev}, nil
	}
	return PoolResult{}, ipam.Refuse(ipam.ErrTooMuchContention, "pools kept changing concurrently; retry")
}

// replayPool returns the pool a replayed CreatePool or UpdatePool
// answered, as it answered it (a record of an older version names the pool
// only: the pool is read).
func (a *Allocator) replayPool(ctx context.Context, r replay) (PoolResult, error) {
	if r.Pool != nil {
		return PoolResult{Pool: r.Pool, Rev: r.rev()}, nil
	}
	return a.GetPool(ctx, strings.TrimPrefix(r.Name, "pools/"))
}

// GetPool reads a pool from etcd.
func (a *Allocator) GetPool(ctx context.Context, name string) (PoolResult, error) {
	ev, err := a.store.Get(ctx, ipam.Ref{Kind: ipam.KindPool, ID: name})
	if errors.Is(err, ipam.ErrNotFound) {
		return PoolResult{}, ipam.Refuse(ipam.ErrNotFound, "pool %q not found", name)
	}
	if err != nil {
		return PoolResult{}, err
	}
	return PoolResult{Pool: ev.Value.(*ipam.Pool), Rev: ev.Rev}, nil
}

// UpdatePool replaces a pool's definition with next (validated, fields
// merged by the caller from the mask). etagRev, if positive, must match.
func (a *Allocator) UpdatePool(ctx context.Context, next *ipam.Pool, etagRev int64, validateOnly bool, meta Meta) (PoolResult, error) {
	if r, ok, err := a.replayed(ctx, adminTenant, meta); ok || err != nil {
		if err != nil {
			return PoolResult{}, err
		}
		return a.replayPool(ctx, r)
	}
	ref := ipam.Ref{Kind: ipam.KindPool, ID: next.Name}
	for range a.opts.MaxAttempts {
		cur, err := a.GetPool(ctx, next.Name)
		if err != nil {
			return PoolResult{}, err
		}
		if etagRev > 0 && etagRev != cur.Rev {
			return PoolResult{}, ipam.Refuse(ipam.ErrEtagMismatch, "pool %q changed since etag was read", next.Name)
		}
		np := *next
		np.UID, np.CreateTime, np.UpdateTime, np.Deleting = cur.Pool.UID, cur.Pool.CreateTime, a.opts.Now(), cur.Pool.Deleting
		ch := ipam.Change{Conds: []ipam.Cond{{Ref: ref, Rev: cur.Rev}}, Puts: []ipam.Put{{Ref: ref, Value: &np}}}
		if spaceChanged(cur.Pool, &np) {
			pools, rev, err := a.allPools(ctx)
			if err != nil {
				return PoolResult{}, err
			}
			if err := overlapping(pools, np.Name, np.Ranges); err != nil {
				return PoolResult{}, err
			}
			space, err := addrspace.NewSpace(np.Ranges, np.Exclusions, np.AvoidBuggyIPs)
			if err != nil {
				return PoolResult{}, fmt.Errorf("allocator: pool space: %w", err)
			}
			for _, r := range cur.Pool.Ranges {
				claims, err := a.store.ClaimsIn(ctx, ipam.ClaimRef(r.From), ipam.ClaimRef(r.To), rev)
				if err != nil {
					return PoolResult{}, err
				}
				var lost []*ipam.Claim
				for _, ev := range claims {
					if c := ev.Value.(*ipam.Claim); !space.Contains(c.Addr) {
						lost = append(lost, c)
					}
				}
				if len(lost) > 0 {
					return PoolResult{}, ipam.Refuse(ipam.ErrPoolInUse, "the change would remove %d address(es) in use from the pool: %s; release them (or their holds) first", len(lost), a.describeClaims(lost, maxDescribed))
				}
				ch.Unchanged = append(ch.Unchanged, ipam.RangeCond{From: ipam.ClaimRef(r.From), To: ipam.ClaimRef(r.To), Since: rev})
			}
			ch.Unchanged = append(ch.Unchanged, ipam.RangeCond{From: ipam.Ref{Kind: ipam.KindPool}, To: ipam.Ref{Kind: ipam.KindPool}, Since: rev})
		}
		if validateOnly {
			return PoolResult{Pool: &np, Rev: cur.Rev}, nil
		}
		a.addRequest(&ch, adminTenant, meta, replay{Name: "pools/" + np.Name, Pool: &np})
		crev, _, err := a.store.Commit(ctx, ch)
		if errors.Is(err, ipam.ErrConflict) {
			if r, ok, err := a.racedRetry(ctx, adminTenant, meta); ok || err != nil {
				if err != nil {
					return PoolResult{}, err
				}
				return a.replayPool(ctx, r)
			}
			continue
		}
		if err != nil {
			return PoolResult{}, err
		}
		a.idx.Apply([]ipam.Event{{Ref: ref, Value: &np, Rev: crev}}, 0)
		return PoolResult{Pool: &np, Rev: crev}, nil
	}
	return PoolResult{}, ipam.Refuse(ipam.ErrTooMuchContention, "pool kept changing concurrently; retry")
}

func spaceChanged(a, b *ipam.Pool) bool {
	return !slices.Equal(a.Ranges, b.Ranges) || !slices.Equal(a.Exclusions, b.Exclusions) || a.AvoidBuggyIPs != b.AvoidBuggyIPs
}

// poolClaims reads the claims in a pool's ranges at revision rev.
func (a *Allocator) poolClaims(ctx context.Context, p *ipam.Pool, rev int64) ([]ipam.Event, error) {
	var out []ipam.Event
	for _, r := range p.Ranges {
		claims, err := a.store.ClaimsIn(ctx, ipam.ClaimRef(r.From), ipam.ClaimRef(r.To), rev)
		if err != nil {
			return nil, err
		}
		out = append(out, claims...)
	}
	return out, nil
}

// DeletePool deletes a pool; with force, it first stops the pool handing
// out addresses and releases every allocation in it.
func (a *Allocator) DeletePool(ctx context.Context, name string, etagRev int64, force bool, meta Meta) (PoolResult, error) {
	if r, ok, err := a.replayed(ctx, adminTenant, meta); ok || err != nil {
		return PoolResult{Released: r.Released}, err
	}
	ref := ipam.Ref{Kind: ipam.KindPool, ID: name}
	released := 0
	for range a.opts.MaxAttempts {
		cur, err := a.GetPool(ctx, name)
		if errors.Is(err, ipam.ErrNotFound) {
			if r, ok, rerr := a.racedRetry(ctx, adminTenant, meta); ok || rerr != nil {
				return PoolResult{Released: r.Released}, rerr
			}
		}
		if err != nil {
			return PoolResult{}, err
		}
		if etagRev > 0 && etagRev != cur.Rev && !cur.Pool.Deleting {
			return PoolResult{}, ipam.Refuse(ipam.ErrEtagMismatch, "pool %q changed since etag was read", name)
		}
		claims, err := a.poolClaims(ctx, cur.Pool, 0)
		if err != nil {
			return PoolResult{}, err
		}
		if len(claims) > 0 {
			if !force {
				used := make([]*ipam.Claim, 0, len(claims))
				for _, ev := range claims {
					used = append(used, ev.Value.(*ipam.Claim))
				}
				return PoolResult{}, ipam.Refuse(ipam.ErrPoolInUse, "pool %q has %d address(es) in use: %s; release them (or their holds) or delete with force", name, len(claims), a.describeClaims(used, maxDescribed))
			}
			n, err := a.drain(ctx, cur, claims, meta)
			released += n
			if err != nil {
				return PoolResult{Released: released}, err
			}
			continue
		}
		ch := ipam.Change{Conds: []ipam.Cond{{Ref: ref, Rev: cur.Rev}}, Deletes: []ipam.Ref{ref}}
		for _, r := range cur.Pool.Ranges {
			ch.Unchanged = append(ch.Unchanged, ipam.RangeCond{From: ipam.ClaimRef(r.From), To: ipam.ClaimRef(r.To), Since: cur.Rev})
		}
		a.addRequest(&ch, adminTenant, meta, replay{Name: "pools/" + name, Released: released})
		crev, _, err := a.store.Commit(ctx, ch)
		if errors.Is(err, ipam.ErrConflict) {
			if r, ok, err := a.racedRetry(ctx, adminTenant, meta); ok || err != nil {
				return PoolResult{Released: r.Released}, err
			}
			continue
		}
		if err != nil {
			return PoolResult{Released: released}, err
		}
		a.idx.Apply([]ipam.Event{{Ref: ref, Rev: crev}}, 0)
		return PoolResult{Released: released}, nil
	}
	return PoolResult{Released: released}, ipam.Refuse(ipam.ErrTooMuchContention, "pool kept changing concurrently; retry")
}

// drain marks a pool as being deleted and releases what it holds.
func (a *Allocator) drain(ctx context.Context, cur PoolResult, claims []ipam.Event, meta Meta) (int, error) {
	if !cur.Pool.Deleting {
		np := *cur.Pool
		np.Deleting = true
		ref := ipam.Ref{Kind: ipam.KindPool, ID: np.Name}
		crev, _, err := a.store.Commit(ctx, ipam.Change{Conds: []ipam.Cond{{Ref: ref, Rev: cur.Rev}}, Puts: []ipam.Put{{Ref: ref, Value: &np}}})
		if err != nil {
			return 0, err
		}
		a.idx.Apply([]ipam.Event{{Ref: ref, Value: &np, Rev: crev}}, 0)
	}
	released := 0
	zero := new(time.Duration)
	for _, ev := range claims {
		c := ev.Value.(*ipam.Claim)
		for _, h := range c.Holders {
			_, err := a.Release(ctx, h.TenantIn(c), h.Allocation, 0, zero, Meta{Actor: meta.Actor})
			if err != nil && !errors.Is(err, ipam.ErrNotFound) {
				return released, err
			}
			if err == nil {
				released++
			}
		}
		if c.HeldFor != "" {
			if err := a.endHold(ctx, c.Tenant, c.HeldFor, Meta{Actor: "system"}); err != nil {
				return released, err
			}
		}
	}
	return released, nil
}

// endHold frees the addresses kept for a released owner now.
func (a *Allocator) endHold(ctx context.Context, tenant, id string, meta Meta) error {
	ref := ipam.RefOf(ipam.KindHold, tenant, id)
	if _, err := a.readThrough(ctx, ref); err != nil {
		return err
	}
	rsv := a.decideExpire(ref, farFuture)
	if rsv == nil {
		return nil
	}
	a.addLog(&rsv.Change, ipam.ActionHoldEnd, rsv.Before, meta, a.opts.Now(), replay{})
	_, err := a.commit(ctx, rsv)
	if errors.Is(err, ipam.ErrConflict) {
		return nil // the caller reads the pool's claims again
	}
	return err
}

// maxDescribed is how many addresses a refused pool change lists.
const maxDescribed = 10

// farFuture makes any hold due, for ending holds early.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// endHoldOf ends the hold kept for the released allocation tenant/id, if
// there is one, and returns its addresses; held reports whether there was.
func (a *Allocator) endHoldOf(ctx context.Context, tenant, id string, meta Meta) (addrs []netip.Addr, held bool, err error) {
	ref := ipam.RefOf(ipam.KindHold, tenant, id)
	for range a.opts.MaxAttempts {
		found, err := a.readThrough(ctx, ref)
		if err != nil || !found {
			return nil, false, err
		}
		h, ok := a.idx.Hold(tenant, id)
		if !ok {
			return nil, false, nil
		}
		rsv := a.decideExpire(ref, farFuture)
		if rsv == nil {
			return nil, false, nil
		}
		// A retry with the request's ID answers the addresses again.
		a.addLog(&rsv.Change, ipam.ActionHoldEnd, rsv.Before, meta, a.opts.Now(), replay{Name: nameOf(rsv.Before), Addrs: slices.Clone(h.Allocation.Addrs)})
		_, err = a.commit(ctx, rsv)
		if errors.Is(err, ipam.ErrConflict) {
			if r, ok, rerr := a.racedRetry(ctx, tenant, meta); ok || rerr != nil {
				return r.Addrs, ok, rerr
			}
			continue
		}
		if err != nil {
			return nil, false, err
		}
		return slices.Clone(h.Allocation.Addrs), true, nil
	}
	return nil, false, ipam.Refuse(ipam.ErrTooMuchContention, "hold kept changing concurrently; retry")
}

// describeClaims lists the addresses of claims with who uses each
// (allocated to an owner, or held for a released one until when), at most
// limit of them.
func (a *Allocator) describeClaims(claims []*ipam.Claim, limit int) string {
	parts := make([]string, 0, min(len(claims), limit))
	for _, c := range claims[:min(len(claims), limit)] {
		parts = append(parts, c.Addr.String()+" ("+a.idx.DescribeClaim(c)+")")
	}
	s := strings.Join(parts, ", ")
	if len(claims) > limit {
		s += fmt.Sprintf(" and %d more", len(claims)-limit)
	}
	return s
}
