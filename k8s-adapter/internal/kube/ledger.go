package kube

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/beaconlb/beacon/k8s-adapter/internal/lb"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// ledger applies desired sets of IPAM resources (see apply) and remembers
// the hash of what it last wrote per resource, so that unchanged resources
// are not written again, and which resources the IPAM refused: each backs
// off on its own (see failure), so that one failing object does not hold
// back the others.
type ledger struct {
	logger *slog.Logger
	what   string // what the resources are, for logs: "MetalLB resource"
	// minBackoff and maxBackoff bound a failing resource's back-off.
	minBackoff, maxBackoff time.Duration

	mu      sync.Mutex
	applied map[string][32]byte // "kind/id" -> hash
	failed  map[string]*failure // "kind/id" -> its last failure
}

// failure is a resource the IPAM refused: the same content is not sent
// again before retry (the back-off doubles per failure); a changed one is
// sent at once.
type failure struct {
	sum   [32]byte
	err   error
	delay time.Duration
	retry time.Time
}

func newLedger(logger *slog.Logger, what string) *ledger {
	return &ledger{logger: logger, what: what, applied: map[string][32]byte{}, failed: map[string]*failure{},
		minBackoff: 500 * time.Millisecond, maxBackoff: 30 * time.Second}
}

// backingOff returns the last error of a resource whose content sum failed
// and whose back-off has not ended.
func (l *ledger) backingOff(key string, sum [32]byte, now time.Time) (error, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.failed[key]
	if !ok || f.sum != sum || !now.Before(f.retry) {
		return nil, false
	}
	return f.err, true
}

// fail records a failure of content sum and returns its back-off.
func (l *ledger) fail(key string, sum [32]byte, err error, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.failed[key]
	if !ok || f.sum != sum {
		f = &failure{sum: sum}
		l.failed[key] = f
	}
	f.err = err
	f.delay = min(max(2*f.delay, l.minBackoff), l.maxBackoff)
	f.retry = now.Add(f.delay)
	return f.delay
}

func (l *ledger) succeeded(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.failed, key)
}

// nextRetry returns when the earliest back-off ends; zero if none.
func (l *ledger) nextRetry() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var next time.Time
	for _, f := range l.failed {
		if next.IsZero() || f.retry.Before(next) {
			next = f.retry
		}
	}
	return next
}

func (l *ledger) same(key string, sum [32]byte) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.applied[key] == sum
}

func (l *ledger) set(key string, sum [32]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applied[key] = sum
}

func (l *ledger) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.applied, key)
}

// desired is one IPAM resource a Kubernetes object stands for.
type desired[T proto.Message] struct {
	id  string
	msg T
	out *outcome
}

// kindOps are the IPAM calls for one kind of resource.
type kindOps[T proto.Message] struct {
	kind string
	// list returns the adapter's own resources of the kind, by ID.
	list   func(ctx context.Context) (map[string]T, error)
	create func(ctx context.Context, id string, v T) error
	update func(ctx context.Context, id string, v T) error
	delete func(ctx context.Context, id string) error
	// conditions returns a resource's own flags.
	conditions func(v T) []*ipamv1.Condition
	// after is called with the created or updated resources' IDs.
	after func(ctx context.Context, changed []string)
	// equal, if set, compares an existing resource with the desired one;
	// an equal one is not written, whatever the ledger remembers (so a
	// change made by someone else is undone at the next pass).
	equal func(have, want T) bool
}

// apply creates and updates the desired resources and returns the step that
// deletes the adapter's resources no longer desired.
func apply[T proto.Message](ctx context.Context, l *ledger, ops kindOps[T], want []desired[T]) (func() error, error) {
	have, err := ops.list(ctx)
	if err != nil {
		for _, d := range want {
			d.out.err = err
		}
		return func() error { return nil }, fmt.Errorf("list %s: %w", ops.kind, err)
	}
	var errs []error
	var changed []string
	wanted := map[string]bool{}
	for _, d := range want {
		wanted[d.id] = true
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(d.msg)
		if err != nil {
			return func() error { return nil }, err
		}
		sum := sha256.Sum256(b)
		key := ops.kind + "/" + d.id
		if ferr, ok := l.backingOff(key, sum, time.Now()); ok {
			d.out.err = ferr // as it was: tried again when its back-off ends
			continue
		}
		same := l.same(key, sum)
		cur, exists := have[d.id]
		if exists && ops.equal != nil {
			same = ops.equal(cur, d.msg)
		}
		switch {
		case !exists:
			err = ops.create(ctx, d.id, d.msg)
		case !same:
			err = ops.update(ctx, d.id, d.msg)
		}
		if err != nil {
			d.out.err = err
			l.forget(key)
			if lb.Retryable(err) {
				// The IPAM is unreachable or busy: the whole import backs
				// off.
				errs = append(errs, fmt.Errorf("%s %s: %w", ops.kind, d.id, err))
				continue
			}
			delay := l.fail(key, sum, err, time.Now())
			l.logger.WarnContext(ctx, l.what+" refused; retrying it alone", "kind", ops.kind, "id", d.id, "error", err, "in", delay.String())
			continue
		}
		l.succeeded(key)
		if !exists || !same {
			changed = append(changed, d.id)
			l.set(key, sum)
			l.logger.InfoContext(ctx, l.what+" applied", "kind", ops.kind, "id", d.id, "created", !exists)
		}
		if exists && ops.conditions != nil {
			d.out.conditions = ops.conditions(cur)
		}
	}
	if len(changed) > 0 && ops.after != nil {
		ops.after(ctx, changed)
	}
	return func() error {
		var errs []error
		for id := range have {
			if wanted[id] {
				continue
			}
			if err := ops.delete(ctx, id); err != nil {
				errs = append(errs, fmt.Errorf("delete %s %s: %w", ops.kind, id, err))
				continue
			}
			l.forget(ops.kind + "/" + id)
			l.logger.InfoContext(ctx, l.what+" removed", "kind", ops.kind, "id", id)
		}
		return errors.Join(errs...)
	}, errors.Join(errs...)
}

// listAll pages through a List call.
func listAll[T any](ctx context.Context, page func(ctx context.Context, token string) ([]T, string, error)) ([]T, error) {
	var out []T
	token := ""
	for {
		items, next, err := page(ctx, token)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if next == "" {
			return out, nil
		}
		token = next
	}
}

func ignoreNotFound(err error) error {
	if lb.ReasonOf(err) == "NOT_FOUND" {
		return nil
	}
	return err
}

// minResyncGap is the least time between two passes of a resyncLoop, so
// that a burst of changes (labels rewritten on every Node) makes a few
// passes, not one per change.
const minResyncGap = 200 * time.Millisecond

// maxSettle bounds the wait for a quiet moment (see resyncLoop): at most
// this, or 8 times the settle time if that is longer.
const maxSettle = 2 * time.Second

// resyncLoop calls sync at once (after a quiet moment, see settle, if a
// trigger is pending), then on every trigger and every period,
// at most once per minResyncGap, until ctx is done. With settle > 0, a
// trigger is followed by a wait until no trigger came for settle (see
// maxSettle), so that objects applied together are synced together. After
// a failure (the IPAM unreachable) it calls sync again after a back-off
// (0.5 s doubling to 30 s) or at the next trigger, whichever comes first;
// objects the IPAM refused back off on their own, and retryAt says when the
// first of them is due. what names the synced things in logs.
func resyncLoop(ctx context.Context, logger *slog.Logger, what string, period, settle time.Duration, trigger <-chan struct{}, retryAt func() time.Time, sync func(context.Context) error) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	delay := time.Duration(0)
	select {
	case <-trigger:
		// Objects were added as the cache filled: some may still be
		// arriving (applied as the adapter started).
		if !waitQuiet(ctx, trigger, settle) {
			return
		}
	default:
	}
	for {
		start := time.Now()
		err := sync(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			delay = min(max(2*delay, 500*time.Millisecond), 30*time.Second)
			logger.WarnContext(ctx, what+" not all synced; retrying", "error", err, "in", delay.String())
		} else {
			delay = 0
			logger.DebugContext(ctx, what+" synced", "took", time.Since(start).String())
		}
		wait := tick.C
		if delay > 0 {
			wait = time.After(delay)
		} else if next := retryAt(); !next.IsZero() {
			// An object backing off on its own (see ledger.fail) is tried
			// again when its back-off ends.
			wait = time.After(max(time.Until(next), 0))
		}
		// A change is applied at once, back-off or not: an object whose
		// previous content failed is sent again only if it changed.
		select {
		case <-ctx.Done():
			return
		case <-trigger:
			if !waitQuiet(ctx, trigger, settle) {
				return
			}
		case <-wait:
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(minResyncGap))):
		}
	}
}

// waitQuiet waits until no trigger came for settle, or the bound of
// maxSettle passed;
// it returns false if ctx is done first.
func waitQuiet(ctx context.Context, trigger <-chan struct{}, settle time.Duration) bool {
	if settle <= 0 {
		return true
	}
	quiet := time.NewTimer(settle)
	defer quiet.Stop()
	limit := time.NewTimer(max(maxSettle, 8*settle))
	defer limit.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-trigger:
			quiet.Reset(settle)
		case <-quiet.C:
			return true
		case <-limit.C:
			return true
		}
	}
}
