// Package allocator runs the IPAM's write paths: it plans allocations,
// releases and renewals on the replica's index, commits them through the
// store with their audit and request records, retries on conflict, and frees
// allocations and holds whose time ran out. It owns no state of its own.
package allocator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/beaconlb/beacon/services/ipam/internal/assign"
	"github.com/beaconlb/beacon/services/ipam/internal/index"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Store is what the allocator needs of storage.
type Store interface {
	Commit(ctx context.Context, ch ipam.Change) (int64, []ipam.Event, error)
	Get(ctx context.Context, r ipam.Ref) (ipam.Event, error)
	Revision(ctx context.Context) (int64, error)
	RequestProgress(ctx context.Context) error
	List(ctx context.Context, kind ipam.Kind, idPrefix, startAfter string, limit int, rev int64) (ipam.Page, error)
	ClaimsIn(ctx context.Context, from, to ipam.Ref, rev int64) ([]ipam.Event, error)
}

// Options tunes an Allocator.
type Options struct {
	// DefaultHold is how long released addresses are kept for their owner
	// when a release does not say (default 0: freed at once).
	DefaultHold time.Duration
	// MaxAttempts bounds the retries of one request on conflicts (default 32).
	MaxAttempts int
	// Now returns the time (default time.Now).
	Now func() time.Time
	// Meter records the allocator's metrics (default: none).
	Meter metric.Meter
	// ListPage is how many objects one read of a listing that must see
	// every object (the users of a config object) asks etcd for (default
	// 1000).
	ListPage int
}

// Allocator runs allocations, releases and renewals.
type Allocator struct {
	idx    *index.Index
	store  Store
	logger *slog.Logger
	opts   Options
	m      metrics
}

// New returns an Allocator over a replica's index and its store.
func New(idx *index.Index, store Store, logger *slog.Logger, opts Options) *Allocator {
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 32
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ListPage <= 0 {
		opts.ListPage = 1000
	}
	return &Allocator{idx: idx, store: store, logger: logger, opts: opts, m: newMetrics(opts.Meter)}
}

// Meta is who asks, and the request's idempotency key.
type Meta struct {
	Actor string
	// RequestID, with Method and Fingerprint, makes a retry return the
	// first request's result.
	RequestID   string
	Method      string
	Fingerprint string
}

// replay is the stored result of a request with a request_id: all that
// its response shows, so that a retry answers exactly what the first
// request did, whatever happened to the object since (it may have been
// changed, released, or ended and created again by another request).
type replay struct {
	Name        string       `json:"name,omitempty"`
	Created     bool         `json:"created,omitempty"`
	Addrs       []netip.Addr `json:"addrs,omitempty"`
	HoldExpires time.Time    `json:"holdExpires,omitzero"`
	Released    int          `json:"released,omitempty"`
	// Allocation, Pool and Value are the object as the request left it:
	// an allocation, a pool, or an announcement config object or tenant
	// (encoded as stored, decoded by the kind of its ref).
	Allocation *ipam.Allocation `json:"allocation,omitempty"`
	Pool       *ipam.Pool       `json:"pool,omitempty"`
	Value      json.RawMessage  `json:"value,omitempty"`
	// Rev is the object's revision (its etag) when the request did not
	// write it (an Allocate that found its owner's allocation). Otherwise
	// 0: the object was written with the record, in one transaction, whose
	// revision is the record's.
	Rev int64 `json:"rev,omitempty"`
	// recordRev is the revision of the record itself.
	recordRev int64
}

// rev returns the revision of the object the replayed request returned.
func (r replay) rev() int64 {
	if r.Rev > 0 {
		return r.Rev
	}
	return r.recordRev
}

// Result is the outcome of a write.
type Result struct {
	Allocation *ipam.Allocation
	// Rev is the allocation's revision (its etag).
	Rev     int64
	Created bool
	// Addrs and HoldExpires describe a release.
	Addrs       []netip.Addr
	HoldExpires time.Time
}

// Allocate gives req.Owner in req.Tenant its addresses.
func (a *Allocator) Allocate(ctx context.Context, req *ipam.Allocation, meta Meta) (Result, error) {
	res, err := a.allocate(ctx, req, meta)
	op := "allocate"
	if err == nil && !res.Created {
		op = "allocate_existing"
	}
	a.m.record(ctx, op, err)
	return res, err
}

func (a *Allocator) allocate(ctx context.Context, req *ipam.Allocation, meta Meta) (Result, error) {
	if r, ok, err := a.replayed(ctx, req.Tenant, meta); ok || err != nil {
		if err != nil {
			return Result{}, err
		}
		return a.replayAllocation(ctx, req.Tenant, r)
	}
	if req.GlobalGroup != "" {
		if err := a.refuseL2(ctx, req); err != nil {
			return Result{}, err
		}
	}
	caughtUp := false
	for attempt := 0; attempt < a.opts.MaxAttempts; attempt++ {
		now := a.opts.Now()
		spec := *req
		plan, err := a.idx.Plan(func(st assign.State) (*assign.Decision, error) { return assign.Allocate(st, &spec, now) })
		if pending := (*assign.Pending)(nil); errors.As(err, &pending) {
			// Another allocation this replica is committing decides what
			// this one gets (it shares its address, or holds the addresses
			// left): wait for it. Waiting is not a conflict; it does not
			// use up an attempt.
			select {
			case <-pending.Done:
			case <-ctx.Done():
				return Result{}, ctx.Err()
			}
			attempt--
			continue
		}
		if err != nil && !caughtUp && refusedOnState(err) {
			// The refusal may come from this replica's view lagging a
			// change the caller made through another replica (a new pool, a
			// release): catch up with etcd once, then plan again.
			caughtUp = true
			if err := a.catchUp(ctx); err != nil {
				return Result{}, err
			}
			continue
		}
		if err != nil {
			return Result{}, err
		}
		if plan.Reclaims && !caughtUp {
			// Taking a hold is right only if the pool really has nothing
			// else, which no condition of the commit checks: a replica
			// whose view lags a release would break a hold for nothing.
			// Catch up with etcd once, then plan again.
			a.idx.Unreserve(plan)
			caughtUp = true
			if err := a.catchUp(ctx); err != nil {
				return Result{}, err
			}
			continue
		}
		if plan.Existing != nil {
			res, fresh, err := a.confirm(ctx, plan.Existing)
			if err != nil {
				return Result{}, err
			}
			if !fresh {
				continue
			}
			if meta.RequestID == "" {
				return res, nil
			}
			// A retry must get this answer too, even if the allocation
			// changes or ends meanwhile: record it, on the condition that
			// the allocation is still the one read.
			err = a.recordExisting(ctx, res, meta)
			if errors.Is(err, ipam.ErrConflict) {
				if r, ok, err := a.replayed(ctx, req.Tenant, meta); ok || err != nil {
					if err != nil {
						return Result{}, err
					}
					return a.replayAllocation(ctx, req.Tenant, r)
				}
				continue
			}
			if err != nil {
				return Result{}, err
			}
			return res, nil
		}
		if plan.Alloc.UID == "" {
			plan.Alloc.UID = newID()
		}
		// The audit record of the creation stays in the allocation until
		// it ends (ipam.Allocation.Created): no log key in this transaction.
		plan.Alloc.Created = &ipam.Creation{AuditID: auditID(plan.Alloc.CreateTime), Actor: meta.Actor, RequestID: meta.RequestID}
		a.addRequest(&plan.Change, plan.Alloc.Tenant, meta, replay{Name: nameOf(plan.Alloc), Created: true, Allocation: plan.Alloc})
		rev, err := a.commit(ctx, plan)
		if errors.Is(err, ipam.ErrConflict) {
			if r, ok, err := a.racedRetry(ctx, req.Tenant, meta); ok || err != nil {
				if err != nil {
					return Result{}, err
				}
				return a.replayAllocation(ctx, req.Tenant, r)
			}
			continue
		}
		if err != nil {
			return Result{}, err
		}
		return Result{Allocation: plan.Alloc, Rev: rev, Created: true}, nil
	}
	return Result{}, ipam.Refuse(ipam.ErrTooMuchContention, "allocation kept conflicting with concurrent changes; retry")
}

// refusedOnState reports refusals that depend on the state the index
// holds (as opposed to bad requests).
func refusedOnState(err error) bool {
	return errors.Is(err, ipam.ErrNotAllowed) || errors.Is(err, ipam.ErrNotFound) ||
		errors.Is(err, ipam.ErrPoolExhausted) || errors.Is(err, ipam.ErrAddressNotInPool) ||
		errors.Is(err, ipam.ErrAddressInUse) || errors.Is(err, ipam.ErrQuotaExceeded)
}

// catchUp waits (at most 2 s) until the index has seen every change etcd
// had committed when it was called.
func (a *Allocator) catchUp(ctx context.Context) error {
	rev, err := a.store.Revision(ctx)
	if err != nil {
		return err
	}
	if !a.waitIndex(ctx, rev) {
		a.logger.WarnContext(ctx, "index did not catch up with etcd in time", "revision", rev, "progress", a.idx.Progress())
	}
	return nil
}

// waitIndex waits, at most 2 s, until the index has seen every change up to
// rev, asking etcd to report the watch's progress if it is behind; it
// reports whether the index caught up.
func (a *Allocator) waitIndex(ctx context.Context, rev int64) bool {
	if a.idx.Progress() >= rev {
		return true
	}
	_ = a.store.RequestProgress(ctx) // best effort: the wait below bounds it
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return a.idx.WaitProgress(wctx, rev)
}

// CreationRecords returns up to limit of the creation records that live
// allocations keep (see index.Index.CreationRecords), once the index has
// seen every change etcd had committed when it was called: a listing that
// merges them with the audit log read afterwards then misses none.
func (a *Allocator) CreationRecords(ctx context.Context, idPrefix, startAfter string, limit int) ([]*ipam.AuditRecord, bool, error) {
	rev, err := a.store.Revision(ctx)
	if err != nil {
		return nil, false, err
	}
	if !a.waitIndex(ctx, rev) {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("allocator: index behind etcd revision %d: %w", rev, ipam.ErrUnavailable)
	}
	recs, more := a.idx.CreationRecords(idPrefix, startAfter, limit)
	return recs, more, nil
}

// confirm checks with etcd that an allocation the index holds is current;
// fresh false means the index was stale and has been updated.
func (a *Allocator) confirm(ctx context.Context, al *ipam.Allocation) (Result, bool, error) {
	ref := ipam.RefOf(ipam.KindAllocation, al.Tenant, al.ID)
	ev, err := a.store.Get(ctx, ref)
	if err != nil && !errors.Is(err, ipam.ErrNotFound) {
		return Result{}, false, err
	}
	if cur, ok := ev.Value.(*ipam.Allocation); ok {
		if _, rev, _ := a.idx.Allocation(ref.ID); rev == ev.Rev {
			return Result{Allocation: cur, Rev: ev.Rev}, true, nil
		}
	}
	a.idx.Apply([]ipam.Event{ev}, 0)
	return Result{}, false, nil
}

// commit commits a plan and applies it to the index; on conflict it applies
// the current state it got back and returns ipam.ErrConflict.
func (a *Allocator) commit(ctx context.Context, plan *index.Plan) (int64, error) {
	rev, fresh, err := a.store.Commit(ctx, plan.Change)
	if err == nil {
		a.idx.Committed(plan, rev)
		return rev, nil
	}
	// The index takes in what the conflict read (and waits for guarded
	// commits) before the plan's reservations end: ending them wakes the
	// plans waiting on its sharing key, and they must plan on that view.
	var werr error
	if errors.Is(err, ipam.ErrConflict) {
		a.m.conflicts.Add(ctx, 1)
		a.idx.Apply(fresh, 0)
		werr = a.awaitGuards(ctx, fresh)
	}
	a.idx.Unreserve(plan)
	if werr != nil {
		return 0, werr
	}
	return 0, err
}

// awaitGuards waits, after a conflict, until the index has seen every
// commit that wrote one of the guards among fresh: that commit took an
// address under a sharing key (the next plan must see its claim to share
// it) or allocated for a tenant with a quota (the next plan must count it).
// The guard alone, read back by the conflict, carries neither. If the
// index does not catch up within 2 s, planning again could share or count
// wrongly, so the request fails UNAVAILABLE instead (the caller retries).
func (a *Allocator) awaitGuards(ctx context.Context, fresh []ipam.Event) error {
	var rev int64
	for _, ev := range fresh {
		if (ev.Ref.Kind == ipam.KindShare || ev.Ref.Kind == ipam.KindTenantGuard) && ev.Value != nil {
			rev = max(rev, ev.Rev)
		}
	}
	if rev == 0 || a.waitIndex(ctx, rev) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	a.logger.WarnContext(ctx, "index did not see a guarded commit in time", "revision", rev, "progress", a.idx.Progress())
	return fmt.Errorf("allocator: index behind a guarded commit at revision %d: %w", rev, ipam.ErrUnavailable)
}

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
		record: func(plan *index.Plan, now time.Time) Result {
			res := Result{Addrs: plan.Before.Addrs}
			if slices.ContainsFunc(plan.Change.Puts, func(p ipam.Put) bool { return p.Ref.Kind == ipam.KindHold }) {
				res.HoldExpires = now.Add(h) // some address is kept (shared ones are not)
			}
			a.addLog(&plan.Change, ipam.ActionRelease, plan.Before, meta, now, replay{Name: nameOf(plan.Before), Addrs: res.Addrs, HoldExpires: res.HoldExpires})
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
		record: func(plan *index.Plan, now time.Time) Result {
			a.addLog(&plan.Change, ipam.ActionRenew, plan.Alloc, meta, now, replay{Name: nameOf(plan.Alloc)})
			return Result{Allocation: plan.Alloc}
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
		record: func(plan *index.Plan, _ time.Time) Result {
			a.addRequest(&plan.Change, tenant, meta, replay{Name: nameOf(plan.Alloc), Allocation: plan.Alloc})
			return Result{Allocation: plan.Alloc}
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
	record func(plan *index.Plan, now time.Time) Result
	// gone answers when the allocation is in neither the index nor etcd
	// (nil: not found).
	gone func(ctx context.Context) (Result, error)
	// answer, if set, turns the stored result of a request with the same
	// request_id that committed first into this request's answer, after a
	// conflict (nil: plan again, unless replayAllocation).
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
		plan, err := a.idx.Plan(func(st assign.State) (*assign.Decision, error) { return w.decide(st, now) })
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
		res := w.record(plan, now)
		rev, err := a.commit(ctx, plan)
		if errors.Is(err, ipam.ErrConflict) {
			if w.answer == nil && !w.replayAllocation {
				continue
			}
			if r, ok, err := a.racedRetry(ctx, w.tenant, w.meta); ok || err != nil {
				if err != nil {
					return Result{}, err
				}
				if w.replayAllocation {
					return a.replayAllocation(ctx, w.tenant, r)
				}
				return w.answer(r), nil
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

// replayed looks up a request_id; ok reports a stored result.
func (a *Allocator) replayed(ctx context.Context, tenant string, meta Meta) (replay, bool, error) {
	if meta.RequestID == "" {
		return replay{}, false, nil
	}
	ev, err := a.store.Get(ctx, ipam.Ref{Kind: ipam.KindRequest, ID: tenant + "/" + meta.RequestID})
	if errors.Is(err, ipam.ErrNotFound) {
		return replay{}, false, nil
	}
	if err != nil {
		return replay{}, false, err
	}
	rec := ev.Value.(*ipam.RequestRecord)
	if rec.Method != meta.Method || rec.Fingerprint != meta.Fingerprint {
		return replay{}, false, ipam.Refuse(ipam.ErrRequestIDReused, "request_id %q was used for a different request", meta.RequestID)
	}
	var r replay
	if err := json.Unmarshal(rec.Result, &r); err != nil {
		return replay{}, false, fmt.Errorf("allocator: stored request result: %w", err)
	}
	r.recordRev = ev.Rev
	return r, true, nil
}

// racedRetry looks up a request_id after a conflict: a retry sent while
// the first request was committing conflicts on the request record, and
// then answers what the first request committed.
func (a *Allocator) racedRetry(ctx context.Context, tenant string, meta Meta) (replay, bool, error) {
	if meta.RequestID == "" {
		return replay{}, false, nil
	}
	return a.replayed(ctx, tenant, meta)
}

// replayAllocation returns the allocation a replayed Allocate or
// UpdateAllocation answered, as it answered it. A record written before
// records kept the allocation names it only: its allocation is read, and
// if it has ended or is another one, the retry is refused.
func (a *Allocator) replayAllocation(ctx context.Context, tenant string, r replay) (Result, error) {
	if r.Allocation != nil {
		return Result{Allocation: r.Allocation, Rev: r.rev(), Created: r.Created}, nil
	}
	ev, err := a.store.Get(ctx, ipam.RefOf(ipam.KindAllocation, tenant, idOf(r.Name)))
	if err != nil {
		if errors.Is(err, ipam.ErrNotFound) {
			return Result{}, ipam.Refuse(ipam.ErrNotFound, "%s was allocated by this request_id but has since been released", r.Name)
		}
		return Result{}, err
	}
	if ev.Rev > r.recordRev {
		return Result{}, ipam.Refuse(ipam.ErrNotFound, "%s has changed since this request_id's request; its answer is no longer known", r.Name)
	}
	return Result{Allocation: ev.Value.(*ipam.Allocation), Rev: ev.Rev, Created: r.Created}, nil
}

// recordExisting writes the request record of an Allocate that found its
// owner's allocation, on the condition that the allocation is still at the
// revision read; ipam.ErrConflict if it changed meanwhile.
func (a *Allocator) recordExisting(ctx context.Context, res Result, meta Meta) error {
	al := res.Allocation
	ch := ipam.Change{Conds: []ipam.Cond{{Ref: ipam.RefOf(ipam.KindAllocation, al.Tenant, al.ID), Rev: res.Rev}}}
	a.addRequest(&ch, al.Tenant, meta, replay{Name: nameOf(al), Allocation: al, Rev: res.Rev})
	_, _, err := a.store.Commit(ctx, ch)
	return err
}

// addLog adds the audit record, and the request record if the request has
// an ID, to a change.
func (a *Allocator) addLog(ch *ipam.Change, action ipam.Action, al *ipam.Allocation, meta Meta, now time.Time, r replay) {
	rec := &ipam.AuditRecord{
		Tenant: al.Tenant, ID: auditID(now), Time: now, Action: action, Actor: meta.Actor,
		Allocation: al.ID, Owner: al.Owner, Addrs: al.Addrs, Pool: al.Pool, RequestID: meta.RequestID,
	}
	ch.Puts = append(ch.Puts, ipam.Put{Ref: ipam.Ref{Kind: ipam.KindAudit, ID: rec.Key()}, Value: rec})
	a.addRequest(ch, al.Tenant, meta, r)
}

// addRequest adds the record of a request with a request_id to a change;
// the change then fails if the ID was used meanwhile.
func (a *Allocator) addRequest(ch *ipam.Change, tenant string, meta Meta, r replay) {
	if meta.RequestID == "" {
		return
	}
	result, err := json.Marshal(r)
	if err != nil {
		return // a replay struct always encodes
	}
	ref := ipam.Ref{Kind: ipam.KindRequest, ID: tenant + "/" + meta.RequestID}
	ch.Conds = append(ch.Conds, ipam.Cond{Ref: ref})
	ch.Puts = append(ch.Puts, ipam.Put{Ref: ref, Value: &ipam.RequestRecord{
		Tenant: tenant, ID: meta.RequestID, Method: meta.Method, Fingerprint: meta.Fingerprint, Result: result,
	}})
}

// auditID sorts newest first: the inverted time in hex, then randomness.
func auditID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%016x%s", uint64(math.MaxInt64-now.UnixNano()), hex.EncodeToString(b[:]))
}

// newID returns a random unique ID.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func nameOf(a *ipam.Allocation) string {
	return "tenants/" + a.Tenant + "/allocations/" + a.ID
}

// idOf returns the allocation ID of a name "tenants/T/allocations/ID".
func idOf(name string) string {
	_, id, _ := strings.Cut(name, "/allocations/")
	return id
}
