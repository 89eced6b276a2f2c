package subscription

import (
	"context"
	"sync"
	"time"
)

// rightsMargin is kept between a grant's end and the earliest moment the
// replica's lease (which the node's registration is tied to) may expire, for the time other replicas take to notice
// nothing (they can only be later) and for clock-rate differences.
const rightsMargin = 100 * time.Millisecond

// aliveUntil is what rights need of the replica's lease.
type aliveUntil interface {
	AliveUntil() time.Time
}

// rights tracks the L2 rights one announcer session grants its node (see
// HeartbeatAck in the API). A grant lets the node answer ARP and NDP for
// the addresses it was sent so far, until length after it sent the
// acknowledged heartbeat. Two rules make it safe:
//
//   - length is shorter than the heartbeat watchdog, so a node that goes
//     silent has lost its right before this replica ends the session for it;
//   - no grant outlives the replica's lease (AliveUntil), which the node's
//     registration is tied to, so a replica cut off
//     from etcd stops granting before the lease can expire and other
//     replicas move the node's addresses.
//
// When the session ends for any other reason on this side (a failed lease
// keep-alive or registration write), the replica waits for the last grant
// to end before it deletes the registration.
type rights struct {
	length time.Duration
	lease  aliveUntil

	mu  sync.Mutex
	end time.Time // when the longest grant so far ends, on this replica's clock
}

func newRights(length time.Duration, lease aliveUntil) *rights {
	return &rights{length: length, lease: lease}
}

// grant returns the length of a right granted now and records its end.
// The node counts the length from when it sent its heartbeat, which was
// before now, so its right ends no later than now+length.
func (r *rights) grant(now time.Time) time.Duration {
	return r.record(now, min(r.length, r.lease.AliveUntil().Sub(now)-rightsMargin))
}

// farewell returns the length of a last right, granted by a replica that
// is stopping and leaves its lease to expire: as long as the lease is
// known to live, less the margin.
func (r *rights) farewell(now time.Time) time.Duration {
	return r.record(now, r.lease.AliveUntil().Sub(now)-rightsMargin)
}

// record notes a right of length d granted at now (none if d is not
// positive) and returns its length.
func (r *rights) record(now time.Time, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	r.mu.Lock()
	if end := now.Add(d); end.After(r.end) {
		r.end = end
	}
	r.mu.Unlock()
	return d
}

// wait returns once every right granted so far has ended, or ctx is done.
func (r *rights) wait(ctx context.Context) {
	r.mu.Lock()
	left := time.Until(r.end)
	r.mu.Unlock()
	if left <= 0 {
		return
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
