package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Lease is an etcd lease that objects can be tied to: they disappear when
// it expires.
//
// It knows a lower bound of its own expiry (AliveUntil): etcd's leader sets
// a lease's expiry to TTL after it processes a grant or a keep-alive, which
// is after this replica sent it, so the lease lives at least until the send
// time of the last answered keep-alive plus the TTL. Callers that promise
// something for as long as the lease lives (the announcer session's L2
// rights) promise no further than that.
//
// One lease is shared by many keys, each written through a Tie of its own
// (a replica's lease carries the registration of every node it serves):
// a key's holder ends its key by deleting it, never by revoking the lease.
type Lease struct {
	s          *Store
	id         clientv3.LeaseID
	ttl        time.Duration
	aliveUntil atomic.Pointer[time.Time]
}

// errTakenOver is returned by a Tie's conditional write or deletion when
// another holder wrote the key since this one last did: the key is left to
// it. It wraps ipam.ErrConflict.
var errTakenOver = fmt.Errorf("store: the key was written by another holder since: left to it: %w", ipam.ErrConflict)

// GrantLease grants a lease of at least ttl (etcd counts whole seconds).
func (s *Store) GrantLease(ctx context.Context, ttl time.Duration) (*Lease, error) {
	secs := max(int64((ttl+time.Second-1)/time.Second), 1)
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	sent := time.Now()
	id, granted, err := s.conn.grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("store: grant lease: %w: %w", ipam.ErrUnavailable, err)
	}
	l := &Lease{s: s, id: id, ttl: time.Duration(granted) * time.Second}
	until := sent.Add(l.ttl)
	l.aliveUntil.Store(&until)
	return l, nil
}

// keepAliveOnce renews lease id once and returns its TTL in seconds (0:
// gone): over the connection's keeper, one stream for every lease.
func (s *Store) keepAliveOnce(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	if s.conn.keeper == nil {
		resp, err := s.client.KeepAliveOnce(ctx, id)
		if err != nil {
			return 0, err
		}
		return resp.TTL, nil
	}
	return s.conn.keeper.keepAliveOnce(ctx, id)
}

// ID returns the lease's etcd ID (for tests and logs).
func (l *Lease) ID() int64 { return int64(l.id) }

// AliveUntil returns a time before which the lease cannot have expired
// unless it was revoked (on the monotonic clock).
func (l *Lease) AliveUntil() time.Time { return *l.aliveUntil.Load() }

// KeepAlive keeps the lease alive until ctx is done; it returns an error
// when the lease is lost (expired or revoked), or when no keep-alive has
// been answered for grace past its AliveUntil.
//
// Between AliveUntil and that point the lease may have expired or may not:
// an etcd leader election stops every keep-alive for a second or two, and
// etcd's new leader extends every lease it takes over, so a lease that
// outlives its AliveUntil during an election is the common case. KeepAlive
// goes on trying through it, and the holder carries on with the same lease
// once etcd answers that it lives; what the holder promises others in the
// meantime must stop at AliveUntil (it is a lower bound, not a guess).
// After grace it gives up: etcd has been out of reach long enough that the
// holder is better off elsewhere (a replica cut from etcd).
//
// Each keep-alive is a call of its own, sent a quarter of the TTL after the
// last one was sent, so that the send time of the one etcd last answered
// is known (clientv3's KeepAlive hides it).
func (l *Lease) KeepAlive(ctx context.Context, grace time.Duration) error {
	period := max(l.ttl/4, 100*time.Millisecond)
	for {
		next := time.Now().Add(period)
		sent := time.Now()
		// One call waits at most a TTL: one stuck on a member that died
		// must not use up the grace.
		cctx, cancel := context.WithDeadline(ctx, earliest(l.AliveUntil().Add(grace), sent.Add(l.ttl)))
		ttl, err := l.s.keepAliveOnce(cctx, l.id)
		cancel()
		if ctx.Err() != nil {
			return nil //nolint:nilerr // the caller is done with the lease: err is its cancellation
		}
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return fmt.Errorf("store: lease lost: %w", err)
		case err == nil && ttl > 0:
			until := sent.Add(time.Duration(ttl) * time.Second)
			l.aliveUntil.Store(&until)
		case err == nil:
			return errors.New("store: lease lost: expired")
		}
		if !time.Now().Before(l.AliveUntil().Add(grace)) {
			return fmt.Errorf("store: lease may have expired: no keep-alive answered for %s: %w", l.ttl+grace, ipam.ErrUnavailable)
		}
		if err != nil {
			next = time.Now().Add(min(period, 100*time.Millisecond)) // try again soon
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(next)):
		}
	}
}

// Tie returns key r tied to the lease: its writes and its deletion
// through the Tie (no call to etcd yet).
func (l *Lease) Tie(r ipam.Ref) *Tie {
	return &Tie{l: l, r: r, k: key(r)}
}

// Tie is one key tied to a lease shared with other keys, written by one
// holder: after its first write (Take), each write and the deletion
// happen only if the key is as this holder last wrote it. A holder that
// another took the key from (a node's next session, on this replica or
// another, under that one's lease) can no longer write or delete it: it
// gets an error wrapping ipam.ErrConflict.
type Tie struct {
	l *Lease
	r ipam.Ref
	k string

	mu  sync.Mutex // one write at a time; guards rev
	rev int64      // revision of this holder's last write (0: none yet)
}

// Take writes value under the key, tied to the lease, whatever the key
// holds now and whatever lease it was tied to: the holder takes the key
// over (a resuming node's session takes its registration from the session
// before, which may be alive and late on another replica: that one's next
// conditional write or deletion fails). It returns the write's revision.
func (t *Tie) Take(ctx context.Context, value any) (int64, error) {
	b, err := encode(t.r.Kind, value)
	if err != nil {
		return 0, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ctx, cancel := t.l.s.bounded(ctx)
	defer cancel()
	rev, err := t.l.s.conn.leasedPut(ctx, t.k, string(b), t.l.id)
	if err != nil {
		return 0, fmt.Errorf("store: put %s: %w: %w", t.k, ipam.ErrUnavailable, err)
	}
	t.rev = rev
	return rev, nil
}

// Put writes value under the key, tied to the lease, if the key is as this
// holder last wrote it; else it returns an error wrapping
// ipam.ErrConflict. Before a Take it writes nothing and returns that
// error.
func (t *Tie) Put(ctx context.Context, value any) (int64, error) {
	b, err := encode(t.r.Kind, value)
	if err != nil {
		return 0, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rev == 0 {
		return 0, errTakenOver
	}
	ctx, cancel := t.l.s.bounded(ctx)
	defer cancel()
	resp, err := t.l.s.conn.txnIfMod(ctx, t.k, t.rev, &etcdserverpb.RequestOp{Request: &etcdserverpb.RequestOp_RequestPut{
		RequestPut: &etcdserverpb.PutRequest{Key: []byte(t.k), Value: b, Lease: int64(t.l.id)},
	}})
	if err != nil {
		return 0, fmt.Errorf("store: put %s: %w: %w", t.k, ipam.ErrUnavailable, err)
	}
	if !resp.Succeeded {
		return 0, errTakenOver
	}
	t.rev = resp.Header.Revision
	return t.rev, nil
}

// Delete deletes the key if it is as this holder last wrote it; else
// (another holder took it, or the lease expired and took it along) it
// deletes nothing and returns an error wrapping ipam.ErrConflict. The
// lease and the other keys tied to it are left alone.
func (t *Tie) Delete(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rev == 0 {
		return errTakenOver
	}
	ctx, cancel := t.l.s.bounded(ctx)
	defer cancel()
	resp, err := t.l.s.conn.txnIfMod(ctx, t.k, t.rev, &etcdserverpb.RequestOp{Request: &etcdserverpb.RequestOp_RequestDeleteRange{
		RequestDeleteRange: &etcdserverpb.DeleteRangeRequest{Key: []byte(t.k)},
	}})
	if err != nil {
		return fmt.Errorf("store: delete %s: %w: %w", t.k, ipam.ErrUnavailable, err)
	}
	if !resp.Succeeded {
		return errTakenOver
	}
	t.rev = 0
	return nil
}

// Campaign blocks until this replica leads the named election, then calls
// lead with a context that is cancelled when leadership is lost or ctx is
// done, and a fence: the condition that this replica's key in the election
// is the one it won with. It campaigns again after losing, until ctx is
// done.
//
// The context alone does not stop a leader that lost from writing: it is
// cancelled only once this replica sees its lease lost, which a replica
// that was paused (a stopped process, a stalled VM) sees seconds after the
// others elected another. A change that must come from the leader carries
// the fence among its conditions: its key goes with the lease, so such a
// change fails with ipam.ErrConflict from the moment another could lead.
func (s *Store) Campaign(ctx context.Context, name, id string, lead func(ctx context.Context, fence ipam.Cond) error) error {
	for {
		err := s.campaignOnce(ctx, name, id, lead)
		select {
		case <-ctx.Done():
			return nil
		default:
		}
		s.logger.WarnContext(ctx, "leadership ended; campaigning again", "election", name, "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *Store) campaignOnce(ctx context.Context, name, id string, lead func(ctx context.Context, fence ipam.Cond) error) error {
	sess, err := concurrency.NewSession(s.client, concurrency.WithTTL(int(max(s.opts.ElectionTTL/time.Second, 1))), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("store: election session: %w", err)
	}
	defer func() { _ = sess.Close() }()
	el := concurrency.NewElection(sess, electionsPrefix+name)
	// Campaign waits on an etcd watch, which the client does not end on
	// ctx while it is reconnecting to an etcd that does not answer: wait
	// on ctx too. The abandoned call ends when the client closes.
	won := make(chan error, 1)
	go func() { won <- el.Campaign(ctx, id) }()
	select {
	case err := <-won:
		if err != nil {
			return fmt.Errorf("store: campaign: %w", err)
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sess.Done():
			cancel()
		case <-lctx.Done():
		}
	}()
	fence := ipam.Cond{Ref: ipam.Ref{Kind: ipam.KindLeadership, ID: strings.TrimPrefix(el.Key(), electionsPrefix)}, Rev: el.Rev()}
	err = lead(lctx, fence)
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer rcancel()
	_ = el.Resign(rctx)
	return err
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// LeaseIDs returns the IDs of every lease etcd holds (the scale
// benchmarks count the leases granted across a replica's death with it).
func (s *Store) LeaseIDs(ctx context.Context) ([]int64, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	resp, err := s.client.Leases(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: list leases: %w: %w", ipam.ErrUnavailable, err)
	}
	ids := make([]int64, len(resp.Leases))
	for i, l := range resp.Leases {
		ids[i] = int64(l.ID)
	}
	return ids, nil
}
