package allocator

import (
	"context"
	"errors"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/assign"
	"github.com/beaconlb/beacon/services/ipam/internal/index"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// RunExpiry frees allocations whose TTL ran out and addresses kept for
// released owners whose hold ended, until ctx is done. Every replica runs
// it; the conditional commit makes exactly one of them succeed per object.
func (a *Allocator) RunExpiry(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-a.idx.Wake():
		}
		now := a.opts.Now()
		due, next := a.idx.Due(now)
		for _, ref := range due {
			a.expire(ctx, ref, now)
		}
		wait := time.Second // also bounds how late a clock jump is noticed
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(a.opts.Now()), 10*time.Millisecond))
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

func (a *Allocator) expire(ctx context.Context, ref ipam.Ref, now time.Time) {
	rsv := a.decideExpire(ref, now)
	if rsv == nil {
		return
	}
	action := ipam.ActionExpire
	if ref.Kind == ipam.KindHold {
		action = ipam.ActionHoldEnd
	}
	a.addLog(&rsv.Change, action, rsv.Before, Meta{Actor: "system"}, now, replay{})
	_, err := a.commit(ctx, rsv)
	a.m.record(ctx, "expire", err)
	switch {
	case err == nil:
		a.logger.InfoContext(ctx, "expired", "ref", ref.ID, "kind", int(ref.Kind), "addresses", rsv.Before.Addrs)
	case errors.Is(err, ipam.ErrConflict):
		// Renewed, released or expired by another replica; the index now
		// has the current state, which is due again only if still expiring.
		a.idx.Requeue(ref, now)
	default:
		a.logger.WarnContext(ctx, "expiry failed; will retry", "ref", ref.ID, "error", err)
		a.idx.Requeue(ref, now.Add(time.Second))
	}
}

// decideExpire asks assign whether ref is due at now and, if so, for the
// decision that frees it (nil if not due).
func (a *Allocator) decideExpire(ref ipam.Ref, now time.Time) *index.Reservation {
	p, _ := a.idx.Decide(func(st assign.State) (*assign.Decision, error) { return assign.Expire(st, ref, now), nil })
	return p
}
