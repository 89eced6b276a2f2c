package subscription

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// LeaseTTL bounds how long a node stays registered after its replica
// dies (etcd counts whole seconds; 2 s is its practical minimum): every
// registration a replica writes is tied to the replica's one lease (see
// ReplicaLease). A live replica deletes a registration at once when its
// session ends.
const LeaseTTL = 2 * time.Second

// leaseGrace is how long past the replica lease's known life its keeper
// goes on trying to keep it alive before it gives up (see
// store.Lease.KeepAlive): long enough for an etcd leader election.
const leaseGrace = 2 * LeaseTTL

// ErrLeaseLost ends every session of a replica whose lease was lost: it
// expired or etcd did not answer for leaseGrace past its known life.
var ErrLeaseLost = errors.New("this IPAM replica lost its etcd lease: reconnect")

// KeptLease is an etcd lease as the store grants it: kept alive by one
// loop, with keys tied to it one by one.
type KeptLease interface {
	// KeepAlive keeps the lease alive until ctx is done, going on for up
	// to grace past its known life while etcd does not answer; it returns
	// an error once the lease is lost.
	KeepAlive(ctx context.Context, grace time.Duration) error
	// AliveUntil is a time before which the lease cannot have expired.
	AliveUntil() time.Time
	// Tie returns key r tied to the lease (see Registration).
	Tie(r ipam.Ref) Registration
}

// Registration is one node's registration, tied to the replica's lease
// and written by one session: the first write takes it over from whoever
// held it; the later writes and the deletion happen only if it is as this
// session last wrote it, else they return an error wrapping
// ipam.ErrConflict (the node's next session took it over).
type Registration interface {
	Take(ctx context.Context, value any) (int64, error)
	Put(ctx context.Context, value any) (int64, error)
	Delete(ctx context.Context) error
}

// Granter grants leases (the store).
type Granter interface {
	GrantLease(ctx context.Context, ttl time.Duration) (KeptLease, error)
}

// Lease is the lease a session ties its node's registration to: the
// replica's, shared by every session it serves.
type Lease interface {
	// AliveUntil is a time before which the lease cannot have expired.
	AliveUntil() time.Time
	// Tie returns key r tied to the lease.
	Tie(r ipam.Ref) Registration
	// Done is closed once the lease is lost, or no longer kept alive.
	Done() <-chan struct{}
	// Err says why Done was closed.
	Err() error
}

// Leases hands sessions the replica's lease.
type Leases interface {
	Acquire(ctx context.Context) (Lease, error)
}

// ReplicaLease is a replica's one lease, which every registration its
// sessions write is tied to: one keep-alive per TTL/4 for the whole
// replica, however many nodes it serves (a lease per node cost etcd two
// renewals a second per node; 6,000 a second at 3,000 nodes was more than
// it sustained through a replica's death). It is granted when the first
// session asks for it, and again after it is lost; Run keeps it alive.
// When it is lost, every session tied to it ends (Done), as each node's
// registration is gone or about to go with it. When Run ends (the replica
// stops) the lease is left to expire, revoked by nobody: the announcers
// that reconnect elsewhere within its TTL keep their registrations.
type ReplicaLease struct {
	granter Granter
	logger  *slog.Logger

	mu      sync.Mutex // one grant at a time; guards cur and stopped
	cur     *heldLease // nil: none granted yet, or the last one was lost
	stopped bool
	granted chan struct{} // a lease was granted: Run keeps it alive
}

// NewReplicaLease returns a replica's lease, not granted yet.
func NewReplicaLease(granter Granter, logger *slog.Logger) *ReplicaLease {
	return &ReplicaLease{granter: granter, logger: logger, granted: make(chan struct{}, 1)}
}

// heldLease is one lease of a ReplicaLease.
type heldLease struct {
	KeptLease
	done chan struct{}
	once sync.Once
	err  error
}

func (h *heldLease) Done() <-chan struct{} { return h.done }
func (h *heldLease) Err() error            { <-h.done; return h.err }

func (h *heldLease) end(err error) {
	h.once.Do(func() { h.err = err; close(h.done) })
}

// Acquire returns the replica's lease, granting it if there is none.
func (r *ReplicaLease) Acquire(ctx context.Context) (Lease, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil, ErrStopping
	}
	if r.cur != nil {
		return r.cur, nil
	}
	l, err := r.granter.GrantLease(ctx, LeaseTTL)
	if err != nil {
		return nil, err
	}
	r.cur = &heldLease{KeptLease: l, done: make(chan struct{})}
	select {
	case r.granted <- struct{}{}:
	default:
	}
	return r.cur, nil
}

// current returns the lease granted, if any.
func (r *ReplicaLease) current() *heldLease {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// Run keeps the replica's lease alive until ctx is done: when it is lost,
// the sessions tied to it end and the next session is granted a new one.
// When ctx is done the lease is left to expire and the sessions still
// tied to it end.
func (r *ReplicaLease) Run(ctx context.Context) error {
	defer func() {
		r.mu.Lock()
		r.stopped = true
		cur := r.cur
		r.cur = nil
		r.mu.Unlock()
		if cur != nil {
			cur.end(ErrStopping)
		}
	}()
	for {
		h := r.current()
		if h == nil {
			select {
			case <-ctx.Done():
				return nil
			case <-r.granted:
				continue
			}
		}
		err := h.KeepAlive(ctx, leaseGrace)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("keep-alive ended")
		}
		// Every node this replica serves reconnects: an error, not a
		// warning.
		r.logger.ErrorContext(ctx, "replica lease lost: ending the announcer sessions tied to it", "error", err)
		r.mu.Lock()
		if r.cur == h {
			r.cur = nil
		}
		r.mu.Unlock()
		h.end(fmt.Errorf("%w: %w", ErrLeaseLost, err))
	}
}
