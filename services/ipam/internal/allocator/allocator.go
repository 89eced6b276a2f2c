// Package allocator runs the IPAM's write paths: for an allocation, a
// release, a renewal, an update or an expiry it asks package assign for the
// decision (on the replica's index, see index.Index.Decide), commits it
// through the store with its audit and request records, and decides again on
// conflict (rewrite.go: the one retry loop of the writes to an existing
// allocation); it frees allocations and holds whose time ran out. It owns
// no state of its own and makes no allocation decision itself.
package allocator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
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
	Unreadable(kind ipam.Kind, idPrefix string) bool
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
		rsv, err := a.idx.Decide(func(st assign.State) (*assign.Decision, error) { return assign.Allocate(st, &spec, now) })
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
			// release): catch up with etcd once, then decide again.
			caughtUp = true
			if err := a.catchUp(ctx); err != nil {
				return Result{}, err
			}
			continue
		}
		if err != nil {
			return Result{}, err
		}
		if rsv.Reclaims && !caughtUp {
			// Taking a hold is right only if the pool really has nothing
			// else, which no condition of the commit checks: a replica
			// whose view lags a release would break a hold for nothing.
			// Catch up with etcd once, then decide again.
			a.idx.Unreserve(rsv)
			caughtUp = true
			if err := a.catchUp(ctx); err != nil {
				return Result{}, err
			}
			continue
		}
		if rsv.Existing != nil {
			res, fresh, err := a.confirm(ctx, rsv.Existing)
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
				if res, done, err := a.answeredAllocation(ctx, req.Tenant, meta); done {
					return res, err
				}
				continue
			}
			if err != nil {
				return Result{}, err
			}
			return res, nil
		}
		if rsv.Alloc.UID == "" {
			rsv.Alloc.UID = newID()
		}
		// The audit record of the creation stays in the allocation until
		// it ends (ipam.Allocation.Created): no log key in this transaction.
		rsv.Alloc.Created = &ipam.Creation{AuditID: auditID(rsv.Alloc.CreateTime), Actor: meta.Actor, RequestID: meta.RequestID}
		a.addRequest(&rsv.Change, rsv.Alloc.Tenant, meta, replay{Name: nameOf(rsv.Alloc), Created: true, Allocation: rsv.Alloc})
		rev, err := a.commit(ctx, rsv)
		if errors.Is(err, ipam.ErrConflict) {
			if res, done, err := a.answeredAllocation(ctx, req.Tenant, meta); done {
				return res, err
			}
			continue
		}
		if err != nil {
			return Result{}, err
		}
		return Result{Allocation: rsv.Alloc, Rev: rev, Created: true}, nil
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
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return a.awaitProgress(wctx, rev)
}

// awaitProgress waits until the index has seen every change up to rev, or
// ctx is done, and reports whether it caught up. When the last revisions
// are outside the state the watch follows (an election, a lease's key, the
// audit log), only a progress notification moves the watch to rev: it asks
// etcd for one, and again at growing intervals, since etcd drops a
// request that reaches it while the stream's watches are not yet in sync.
func (a *Allocator) awaitProgress(ctx context.Context, rev int64) bool {
	step := 20 * time.Millisecond
	for {
		_ = a.store.RequestProgress(ctx) // best effort: asked again below
		sctx, cancel := context.WithTimeout(ctx, step)
		caught := a.idx.WaitProgress(sctx, rev)
		cancel()
		if caught {
			return true
		}
		if ctx.Err() != nil {
			return a.idx.Progress() >= rev
		}
		step = min(2*step, 500*time.Millisecond)
	}
}

// CreationRecords returns up to limit of the creation records that live
// allocations keep (see index.Index.CreationRecords), once the index has
// seen every change etcd had committed when it was called: a listing that
// merges them with the audit log read afterwards then misses none.
func (a *Allocator) CreationRecords(ctx context.Context, idPrefix, startAfter string, limit int) ([]*ipam.AuditRecord, bool, error) {
	if err := a.caughtUpForListing(ctx); err != nil {
		return nil, false, err
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

// commit commits a reservation and applies it to the index; on conflict it applies
// the current state it got back and returns ipam.ErrConflict.
func (a *Allocator) commit(ctx context.Context, rsv *index.Reservation) (int64, error) {
	rev, fresh, err := a.store.Commit(ctx, rsv.Change)
	if err == nil {
		a.idx.Committed(rsv, rev)
		return rev, nil
	}
	// The index takes in what the conflict read (and waits for guarded
	// commits) before the reservation ends: ending them wakes the
	// decisions waiting on its sharing key, and they must decide on that view.
	var werr error
	if errors.Is(err, ipam.ErrConflict) {
		a.m.conflicts.Add(ctx, 1)
		a.idx.Apply(fresh, 0)
		werr = a.awaitGuards(ctx, fresh)
	}
	a.idx.Unreserve(rsv)
	if werr != nil {
		return 0, werr
	}
	return 0, err
}

// awaitGuards waits, after a conflict, until the index has seen every
// commit that wrote one of the guards among fresh: that commit took an
// address under a sharing key (the next decision must see its claim to share
// it) or allocated for a tenant with a quota (the next decision must count it).
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
