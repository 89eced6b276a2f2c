package store

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// A follower that receives a write forwards it to the leader and answers
// only once it has applied the entry itself: a round trip between members
// more than writing to the leader. With several endpoints, a Client sends
// its transactions to the leader's endpoint directly (the watch, reads and
// leases stay on the shared, balanced connection). Against a 3-member
// cluster on one machine that is about 100 µs less per transaction; across
// racks or zones it is a network round trip.

// member is a connection to one endpoint of a cluster.
type member struct {
	endpoint string
	etcd     *clientv3.Client
	kv       etcdserverpb.KVClient
	lease    etcdserverpb.LeaseClient
	maint    etcdserverpb.MaintenanceClient
}

// leaderPoll is how often the leader is looked for again; electionPoll is
// how often while no leader is known (an election is under way).
const (
	leaderPoll   = time.Second
	electionPoll = 50 * time.Millisecond
)

// leaderWait is how long a transaction waits for the leader to be known
// before it goes over the balanced connection. A transaction sent to a
// follower in the first second or so after the leader died is forwarded to
// the dead leader and lost: the follower answers only when its own request
// timeout (5 s + 2 election timeouts, 7 s at etcd's defaults) or the call's
// runs out, and with one transaction in flight every write waits for it.
// Sent to the new leader once the election is over, it cannot be forwarded.
// After leaderWait the followers have long noticed the dead leader (an
// election timeout is 1 s at etcd's defaults), so a transaction sent
// through one of them is forwarded to the new leader, if there is one.
const leaderWait = 3 * time.Second

// txnKV returns the KV service transactions go to, and its name for logs:
// the leader's (see leaderMember), else the balanced connection's.
func (c *Client) txnKV(ctx context.Context) (etcdserverpb.KVClient, string) {
	if m := c.leaderMember(ctx); m != nil {
		return m.kv, m.endpoint
	}
	return c.kv, "balanced"
}

// grant grants a lease of secs seconds. With the leader known, it goes to
// the leader's connection as a bare call: clientv3's Grant retries a call
// that could not be sent until ctx ends, so a grant sent to a leader that
// just died would wait out the whole deadline (30 s) instead of failing at
// once and letting the next call find the new leader. A lease grant is a
// raft proposal like a transaction, lost the same way when a follower
// forwards it to a dead leader; without a known leader it goes over the
// balanced connection.
func (c *Client) grant(ctx context.Context, secs int64) (clientv3.LeaseID, int64, error) {
	if m := c.leaderMember(ctx); m != nil {
		resp, err := m.lease.LeaseGrant(ctx, &etcdserverpb.LeaseGrantRequest{TTL: secs})
		if err != nil {
			c.txnFailed(err)
			return 0, 0, err
		}
		if resp.Error != "" {
			return 0, 0, errors.New(resp.Error)
		}
		return clientv3.LeaseID(resp.ID), resp.TTL, nil
	}
	resp, err := c.etcd.Grant(ctx, secs)
	if err != nil {
		return 0, 0, err
	}
	return resp.ID, resp.TTL, nil
}

// leasedPut writes key unconditionally, tied to lease id: to the leader's
// connection as a bare call if the leader is known (see grant), else over
// the balanced connection. It returns the revision of the write.
func (c *Client) leasedPut(ctx context.Context, k, v string, id clientv3.LeaseID) (int64, error) {
	if m := c.leaderMember(ctx); m != nil {
		resp, err := m.kv.Put(ctx, &etcdserverpb.PutRequest{Key: []byte(k), Value: []byte(v), Lease: int64(id)})
		if err != nil {
			c.txnFailed(err)
			return 0, err
		}
		return resp.Header.Revision, nil
	}
	resp, err := c.etcd.Put(ctx, k, v, clientv3.WithLease(id))
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// txnIfMod runs op if key k's modification revision is rev, as one
// transaction: to the leader's connection if it is known (see grant), else
// over the balanced connection.
func (c *Client) txnIfMod(ctx context.Context, k string, rev int64, op *etcdserverpb.RequestOp) (*etcdserverpb.TxnResponse, error) {
	kv, _ := c.txnKV(ctx)
	resp, err := kv.Txn(ctx, &etcdserverpb.TxnRequest{
		Compare: []*etcdserverpb.Compare{{
			Key: []byte(k), Result: etcdserverpb.Compare_EQUAL, Target: etcdserverpb.Compare_MOD,
			TargetUnion: &etcdserverpb.Compare_ModRevision{ModRevision: rev},
		}},
		Success: []*etcdserverpb.RequestOp{op},
	})
	if err != nil {
		c.txnFailed(err)
		return nil, err
	}
	return resp, nil
}

// leaderMember returns the leader's member if it is known and its
// connection is up, else nil (writes then go over the balanced
// connection, which picks a ready member). With several endpoints and the
// leader unknown (it died, or an election is under way), it waits, at most
// leaderWait or until ctx is done, for followLeader to find the new one.
func (c *Client) leaderMember(ctx context.Context) *member {
	if len(c.dial.Endpoints) < 2 || c.closed.Load() {
		return nil
	}
	var deadline <-chan time.Time
	for {
		found := c.found.Load()
		if m := c.leader.Load(); m != nil && m.etcd.ActiveConnection().GetState() == connectivity.Ready {
			return m
		}
		c.lookAgain()
		if deadline == nil {
			t := time.NewTimer(leaderWait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-*found:
		case <-deadline:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// lookAgain has followLeader look for the leader at once.
func (c *Client) lookAgain() {
	select {
	case c.recheck <- struct{}{}:
	default:
	}
}

// LeaderEndpoint returns the endpoint transactions go to, or "" when they
// go over the balanced connection (the leader is unknown, or there is one
// endpoint).
func (c *Client) LeaderEndpoint() string {
	if m := c.leader.Load(); m != nil && !c.closed.Load() {
		return m.endpoint
	}
	return ""
}

// txnFailed forgets the leader after a write that failed as a leader that
// stepped down or died makes it fail (unavailable, out of time, or etcd's
// raft stopping, which reaches the client as Unknown), and has followLeader
// look again at once.
func (c *Client) txnFailed(err error) {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Unknown:
	default:
		return
	}
	if c.leader.Swap(nil) == nil {
		return
	}
	c.lookAgain()
}

// followLeader keeps track of which endpoint leads, every leaderPoll and
// at once after a failed transaction, until ctx is done; then it closes
// the connections it opened. Without several endpoints it returns at once.
// One Store runs it per Client (Store.Run): a Client is not shared by two
// running Stores.
func (c *Client) followLeader(ctx context.Context, logger *slog.Logger, timeout time.Duration) {
	if len(c.dial.Endpoints) < 2 {
		return
	}
	members := make([]*member, len(c.dial.Endpoints))
	defer func() {
		c.leader.Store(nil)
		for _, m := range members {
			if m != nil {
				_ = m.etcd.Close()
			}
		}
	}()
	last, lost := "", time.Time{}
	for {
		ep := c.findLeader(ctx, members, timeout)
		if ep != last && ctx.Err() == nil {
			switch {
			case ep != "" && !lost.IsZero():
				logger.InfoContext(ctx, "etcd transactions go to the new leader", "endpoint", ep, "without_leader", time.Since(lost))
			case ep != "":
				logger.InfoContext(ctx, "etcd transactions go to the leader", "endpoint", ep)
			default:
				logger.WarnContext(ctx, "etcd leader not found; transactions wait for one, then go over the balanced connection", "endpoints", c.dial.Endpoints)
			}
			last = ep
		}
		poll := leaderPoll
		if ep == "" {
			poll = electionPoll
			if lost.IsZero() {
				lost = time.Now()
			}
		} else {
			lost = time.Time{}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(poll):
		case <-c.recheck:
		}
	}
}

// findLeader asks every member at once which of them leads, connecting to
// those it has no connection to yet, and returns the leader's endpoint (""
// if none answered as the leader; of two that do, a deposed leader that has
// not noticed yet and the new one, the one of the higher term). A dead
// member holds up nothing: the members are asked in parallel, and a call
// on a connection that is not up fails at once instead of waiting for it
// (etcd's client waits by default).
func (c *Client) findLeader(ctx context.Context, members []*member, timeout time.Duration) string {
	// Status is answered from memory, and a connection (with etcd's auth,
	// a token) on a healthy member takes milliseconds.
	timeout = min(timeout, time.Second)
	type answer struct {
		m    *member
		term uint64
	}
	answers := make([]answer, len(members))
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() {
			if members[i] == nil {
				m, err := c.connectMember(ctx, c.dial.Endpoints[i], timeout)
				if err != nil {
					return // down for now; tried again next round
				}
				members[i] = m
			}
			m := members[i]
			sctx, cancel := context.WithTimeout(ctx, timeout)
			st, err := m.maint.Status(sctx, &etcdserverpb.StatusRequest{}, grpc.WaitForReady(false))
			cancel()
			if err == nil && st.GetLeader() != 0 && st.GetLeader() == st.GetHeader().GetMemberId() {
				answers[i] = answer{m: m, term: st.GetRaftTerm()}
			}
		})
	}
	wg.Wait()
	var best answer
	for _, a := range answers {
		if a.m != nil && (best.m == nil || a.term > best.term) {
			best = a
		}
	}
	c.leader.Store(best.m)
	if best.m != nil {
		// Wake the transactions waiting for a leader.
		close(*c.found.Swap(ptr(make(chan struct{}))))
		return best.m.endpoint
	}
	return ""
}

func ptr[T any](v T) *T { return &v }

// connectMember opens a connection to one endpoint, with the Client's
// settings.
func (c *Client) connectMember(ctx context.Context, endpoint string, timeout time.Duration) (*member, error) {
	cfg := c.dial
	cfg.Endpoints = []string{endpoint}
	cfg.Context = ctx
	cfg.DialTimeout = timeout
	e, err := clientv3.New(cfg)
	if err != nil {
		return nil, err
	}
	conn := e.ActiveConnection()
	if conn == nil {
		_ = e.Close()
		return nil, errors.New("store: no connection")
	}
	return &member{endpoint: endpoint, etcd: e, kv: etcdserverpb.NewKVClient(conn), lease: etcdserverpb.NewLeaseClient(conn), maint: etcdserverpb.NewMaintenanceClient(conn)}, nil
}

// leaderState is the part of a Client that followLeader keeps.
type leaderState struct {
	// dial is how the Client was dialed (no endpoints: in process).
	dial    clientv3.Config
	leader  atomic.Pointer[member]
	recheck chan struct{}
	// found is closed, and replaced, each time findLeader finds a leader.
	found atomic.Pointer[chan struct{}]
}

// initLeaderState sets up a dialed Client's leader tracking.
func (c *Client) initLeaderState(dial clientv3.Config) {
	c.dial, c.recheck = dial, make(chan struct{}, 1)
	c.found.Store(ptr(make(chan struct{})))
}
