package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Lease is an etcd lease that objects can be tied to: they disappear when
// it is revoked or expires.
//
// It knows a lower bound of its own expiry (AliveUntil): etcd's leader sets
// a lease's expiry to TTL after it processes a grant or a keep-alive, which
// is after this replica sent it, so the lease lives at least until the send
// time of the last answered keep-alive plus the TTL. Callers that promise
// something for as long as the lease lives (the announcer session's L2
// rights) promise no further than that.
type Lease struct {
	s          *Store
	id         clientv3.LeaseID
	ttl        time.Duration
	aliveUntil atomic.Pointer[time.Time]

	// written is the revision of this holder's last write of each key it
	// wrote (see Revoke).
	writtenMu sync.Mutex
	written   map[string]int64
}

// errTakenOver is returned by Revoke when another holder wrote one of the
// lease's keys since this one last did: the lease is left alone. It wraps
// ipam.ErrConflict.
var errTakenOver = fmt.Errorf("store: the lease's keys were written by another holder since: lease left to it: %w", ipam.ErrConflict)

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

// AdoptLease takes over the lease that r is tied to, kept alive so far by
// another holder (a session on another replica, which died or stopped):
// it renews the lease once, then writes value under r tied to it, on the
// condition that r was not written since it was read. It returns
// ipam.ErrNotFound when there is nothing to adopt: r does not exist, is tied
// to no lease, its lease is gone, or r was written in between (then the
// caller grants a lease of its own). No lease is granted: a replica that
// takes over the sessions of one that died costs etcd no grants.
//
// The holder it was taken from revokes it only if r is still as it last
// wrote it (see Revoke): after the adoption it is not.
func (s *Store) AdoptLease(ctx context.Context, r ipam.Ref, value any) (*Lease, error) {
	b, err := encode(r.Kind, value)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	k := key(r)
	got, err := s.client.Get(ctx, k)
	if err != nil {
		return nil, fmt.Errorf("store: adopt lease: %w: %w", ipam.ErrUnavailable, err)
	}
	if len(got.Kvs) == 0 || got.Kvs[0].Lease == 0 {
		return nil, fmt.Errorf("store: adopt lease of %s: %w", k, ipam.ErrNotFound)
	}
	kv := got.Kvs[0]
	id := clientv3.LeaseID(kv.Lease)
	sent := time.Now()
	ttl, err := s.keepAliveOnce(ctx, id)
	if errors.Is(err, errKeeperStream) && ctx.Err() == nil {
		// The shared stream broke under this call (a member died): once
		// more on the next one.
		sent = time.Now()
		ttl, err = s.keepAliveOnce(ctx, id)
	}
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && ttl <= 0):
		return nil, fmt.Errorf("store: adopt lease of %s: expired: %w", k, ipam.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("store: adopt lease: %w: %w", ipam.ErrUnavailable, err)
	}
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", kv.ModRevision)).
		Then(clientv3.OpPut(k, string(b), clientv3.WithLease(id))).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("store: adopt lease: %w: %w", ipam.ErrUnavailable, err)
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("store: adopt lease of %s: written meanwhile: %w", k, ipam.ErrNotFound)
	}
	l := &Lease{s: s, id: id, ttl: time.Duration(ttl) * time.Second}
	until := sent.Add(l.ttl)
	l.aliveUntil.Store(&until)
	l.wrote(k, resp.Header.Revision)
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

// wrote records this holder's write of k at rev.
func (l *Lease) wrote(k string, rev int64) {
	l.writtenMu.Lock()
	defer l.writtenMu.Unlock()
	if l.written == nil {
		l.written = make(map[string]int64)
	}
	if rev > l.written[k] {
		l.written[k] = rev
	}
}

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

// Revoke ends the lease now, deleting every object tied to it, unless
// another holder wrote one of the keys this one wrote since it last did
// (it adopted the lease, see AdoptLease, or tied the key to a lease of its
// own): then it deletes nothing, leaves the lease alone and returns
// an error wrapping ipam.ErrConflict. The keys are deleted first, on that condition, in one
// transaction, so that an adoption either comes before (and the deletion
// does not happen) or finds nothing to adopt.
func (l *Lease) Revoke(ctx context.Context) error {
	ctx, cancel := l.s.bounded(ctx)
	defer cancel()
	l.writtenMu.Lock()
	var cmps []clientv3.Cmp
	var dels []clientv3.Op
	for k, rev := range l.written {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", rev))
		dels = append(dels, clientv3.OpDelete(k))
	}
	l.writtenMu.Unlock()
	if len(cmps) > 0 {
		resp, err := l.s.client.Txn(ctx).If(cmps...).Then(dels...).Commit()
		if err != nil {
			return fmt.Errorf("store: revoke lease: %w: %w", ipam.ErrUnavailable, err)
		}
		if !resp.Succeeded {
			return errTakenOver
		}
	}
	if _, err := l.s.client.Revoke(ctx, l.id); err != nil {
		return fmt.Errorf("store: revoke lease: %w: %w", ipam.ErrUnavailable, err)
	}
	return nil
}

// Put writes an object tied to the lease, unconditionally.
func (l *Lease) Put(ctx context.Context, r ipam.Ref, value any) (int64, error) {
	b, err := encode(r.Kind, value)
	if err != nil {
		return 0, err
	}
	ctx, cancel := l.s.bounded(ctx)
	defer cancel()
	rev, err := l.s.conn.leasedPut(ctx, key(r), string(b), l.id)
	if err != nil {
		return 0, fmt.Errorf("store: put %s: %w: %w", key(r), ipam.ErrUnavailable, err)
	}
	l.wrote(key(r), rev)
	return rev, nil
}

// Campaign blocks until this replica leads the named election, then calls
// lead with a context that is cancelled when leadership is lost or ctx is
// done. It campaigns again after losing, until ctx is done.
func (s *Store) Campaign(ctx context.Context, name, id string, lead func(ctx context.Context) error) error {
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

func (s *Store) campaignOnce(ctx context.Context, name, id string, lead func(ctx context.Context) error) error {
	sess, err := concurrency.NewSession(s.client, concurrency.WithTTL(2), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("store: election session: %w", err)
	}
	defer func() { _ = sess.Close() }()
	el := concurrency.NewElection(sess, root+"elections/"+name)
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
	err = lead(lctx)
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
