package allocator

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/assign"
	"github.com/beaconlb/beacon/services/ipam/internal/index"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Release ends the allocation tenant/id; hold nil means the default hold.
// etagRev, if positive, must match the allocation's revision.
func (a *Allocator) Release(ctx context.Context, tenant, id string, etagRev int64, hold *time.Duration, meta Meta) (Result, error) {
	res, err := a.release(ctx, tenant, id, etagRev, hold, meta)
	a.m.record(ctx, "release", err)
	return res, err
}

func (a *Allocator) release(ctx context.Context, tenant, id string, etagRev int64, hold *time.Duration, meta Meta) (Result, error) {
	released := func(r replay) Result { return Result{Addrs: r.Addrs, HoldExpires: r.HoldExpires} }
	if r, ok, err := a.replayed(ctx, tenant, meta); ok || err != nil {
		return released(r), err
	}
	h := a.opts.DefaultHold
	if hold != nil {
		h = *hold
	}
	return a.rewrite(ctx, rewrite{
		op: "release", tenant: tenant, id: id, meta: meta, answer: released,
		decide: func(st assign.State, now time.Time) (*assign.Decision, error) {
			return assign.Release(st, tenant, id, etagRev, h, now)
		},
		record: func(rsv *index.Reservation, now time.Time) Result {
			res := Result{Addrs: rsv.Before.Addrs}
			if slices.ContainsFunc(rsv.Change.Puts, func(p ipam.Put) bool { return p.Ref.Kind == ipam.KindHold }) {
				res.HoldExpires = now.Add(h) // some address is kept (shared ones are not)
			}
			a.addLog(&rsv.Change, ipam.ActionRelease, rsv.Before, meta, now, replay{Name: nameOf(rsv.Before), Addrs: res.Addrs, HoldExpires: res.HoldExpires})
			return res
		},
		gone: func(ctx context.Context) (Result, error) {
			// A retry sent while the first release committed finds the
			// allocation gone: it answers what the first did.
			if r, ok, err := a.racedRetry(ctx, tenant, meta); ok || err != nil {
				return released(r), err
			}
			// A released owner's hold: releasing it again ends the hold
			// now (an operator freeing a deleted Service's address),
			// whatever hold was asked for.
			if addrs, held, err := a.endHoldOf(ctx, tenant, id, meta); held || err != nil {
				return Result{Addrs: addrs}, err
			}
			return Result{}, notFound(tenant, id)
		},
	})
}

// Renew pushes back the expiry of tenant/id.
func (a *Allocator) Renew(ctx context.Context, tenant, id string, etagRev int64, ttl time.Duration, meta Meta) (Result, error) {
	res, err := a.renew(ctx, tenant, id, etagRev, ttl, meta)
	a.m.record(ctx, "renew", err)
	return res, err
}

func (a *Allocator) renew(ctx context.Context, tenant, id string, etagRev int64, ttl time.Duration, meta Meta) (Result, error) {
	return a.rewrite(ctx, rewrite{
		op: "renew", tenant: tenant, id: id, meta: meta,
		decide: func(st assign.State, now time.Time) (*assign.Decision, error) {
			return assign.Renew(st, tenant, id, etagRev, ttl, now)
		},
		record: func(rsv *index.Reservation, now time.Time) Result {
			a.addLog(&rsv.Change, ipam.ActionRenew, rsv.Alloc, meta, now, replay{Name: nameOf(rsv.Alloc)})
			return Result{Allocation: rsv.Alloc}
		},
	})
}

// Update changes the metadata of tenant/id: change receives a copy of the
// current allocation and edits it.
func (a *Allocator) Update(ctx context.Context, tenant, id string, etagRev int64, change func(*ipam.Allocation), meta Meta) (Result, error) {
	res, err := a.update(ctx, tenant, id, etagRev, change, meta)
	a.m.record(ctx, "update", err)
	return res, err
}

func (a *Allocator) update(ctx context.Context, tenant, id string, etagRev int64, change func(*ipam.Allocation), meta Meta) (Result, error) {
	if r, ok, err := a.replayed(ctx, tenant, meta); ok || err != nil {
		if err != nil {
			return Result{}, err
		}
		return a.replayAllocation(ctx, tenant, r)
	}
	return a.rewrite(ctx, rewrite{
		op: "update", tenant: tenant, id: id, meta: meta,
		replayAllocation: true,
		decide: func(st assign.State, now time.Time) (*assign.Decision, error) {
			cur, _, ok := st.Allocation(tenant + "/" + id)
			if !ok {
				return nil, notFound(tenant, id)
			}
			next := *cur
			change(&next)
			return assign.Update(st, tenant, id, etagRev, &next, now)
		},
		record: func(rsv *index.Reservation, _ time.Time) Result {
			a.addRequest(&rsv.Change, tenant, meta, replay{Name: nameOf(rsv.Alloc), Allocation: rsv.Alloc})
			return Result{Allocation: rsv.Alloc}
		},
	})
}

// rewrite is one write to an existing allocation (a release, a renewal
// or an update), as rewrite runs it.
type rewrite struct {
	op         string // for the refusal when it keeps conflicting
	tenant, id string
	meta       Meta
	// decide decides the write on the index's state.
	decide func(st assign.State, now time.Time) (*assign.Decision, error)
	// record adds the write's audit and request records to its change and
	// returns its result (Rev is set on commit).
	record func(rsv *index.Reservation, now time.Time) Result
	// gone answers when the allocation is in neither the index nor etcd
	// (nil: not found).
	gone func(ctx context.Context) (Result, error)
	// answer, if set, turns the stored result of a request with the same
	// request_id that committed first into this request's answer, after a
	// conflict (nil: decide again, unless replayAllocation).
	answer func(replay) Result
	// replayAllocation answers such a request with its allocation (see
	// Allocator.replayAllocation).
	replayAllocation bool
}

// rewrite runs a write to an existing allocation: it asks assign for the
// decision and commits it, planning again on conflict (at most
// Options.MaxAttempts times). A refusal this replica's index may owe to
// lagging etcd is checked against etcd first: an etag mismatch (once), or
// an allocation the index does not have.
func (a *Allocator) rewrite(ctx context.Context, w rewrite) (Result, error) {
	ref := ipam.RefOf(ipam.KindAllocation, w.tenant, w.id)
	readEtag := false
	for range a.opts.MaxAttempts {
		now := a.opts.Now()
		rsv, err := a.idx.Decide(func(st assign.State) (*assign.Decision, error) { return w.decide(st, now) })
		if errors.Is(err, ipam.ErrEtagMismatch) && !readEtag {
			// The etag may come from a write this replica's index has not
			// seen yet: compare with etcd's copy before refusing.
			readEtag = true
			if _, err := a.readThrough(ctx, ref); err != nil {
				return Result{}, err
			}
			continue
		}
		if errors.Is(err, ipam.ErrNotFound) {
			if found, err := a.readThrough(ctx, ref); err != nil || !found {
				if err != nil {
					return Result{}, err
				}
				if w.gone != nil {
					return w.gone(ctx)
				}
				return Result{}, notFound(w.tenant, w.id)
			}
			continue
		}
		if err != nil {
			return Result{}, err
		}
		res := w.record(rsv, now)
		rev, err := a.commit(ctx, rsv)
		if errors.Is(err, ipam.ErrConflict) {
			switch {
			case w.replayAllocation:
				if res, done, err := a.answeredAllocation(ctx, w.tenant, w.meta); done {
					return res, err
				}
			case w.answer != nil:
				if r, ok, err := a.racedRetry(ctx, w.tenant, w.meta); ok || err != nil {
					return w.answer(r), err
				}
			}
			continue
		}
		if err != nil {
			return Result{}, err
		}
		if res.Allocation != nil {
			res.Rev = rev
		}
		return res, nil
	}
	return Result{}, ipam.Refuse(ipam.ErrTooMuchContention, "%s kept conflicting with concurrent changes; retry", w.op)
}

func notFound(tenant, id string) error {
	return ipam.Refuse(ipam.ErrNotFound, "allocation tenants/%s/allocations/%s not found", tenant, id)
}

// readThrough reads ref from etcd into the index, for when the caller may
// have seen a write this replica's watch has not delivered yet.
func (a *Allocator) readThrough(ctx context.Context, ref ipam.Ref) (bool, error) {
	ev, err := a.store.Get(ctx, ref)
	if errors.Is(err, ipam.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	a.idx.Apply([]ipam.Event{ev}, 0)
	return true, nil
}
