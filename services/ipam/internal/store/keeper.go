package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// keeper sends the keep-alives of every lease of one connection over a few
// etcd LeaseKeepAlive streams (keeperStreams), one request at a time as
// each lease needs it, and hands each answer to the call that asked. clientv3's KeepAliveOnce
// opens a stream per call: with a node lease per announcer, as there was
// before a replica's sessions shared one lease, and a keep-alive every
// 500 ms, thousands of announcers made thousands of
// streams a second, and etcd fell behind until leases expired (see
// docs/performance.md, "Reconnects and L2 moves"). Each call still knows
// when its own request was sent, which the holder's AliveUntil needs;
// clientv3's KeepAlive, which also multiplexes, hides that.
//
// etcd answers a stream's requests in order; the answers for one lease go
// to its callers in the order they asked (a caller that gave up leaves its
// place, and its answer is dropped). An answer with a TTL of 0 says the
// lease is gone.
type keeper struct {
	streams []*keepStream
	// sent counts the keep-alives sent (see Client.KeepAlivesSent).
	sent atomic.Int64
}

// keeperStreams is how many streams a keeper spreads its leases over: etcd
// handles one stream's requests one after the other, and on a follower
// each renewal is a round trip to the leader, so one stream carries a few
// thousand renewals a second at most.
const keeperStreams = 16

// newKeeper returns a keeper whose streams open on the lease service leases
// returns then (the balanced connection's).
func newKeeper(leases func(ctx context.Context) etcdserverpb.LeaseClient) *keeper {
	k := &keeper{}
	for range keeperStreams {
		k.streams = append(k.streams, &keepStream{leases: leases, waiting: map[int64][]chan keepAnswer{}})
	}
	return k
}

// keepAliveOnce renews lease id once and returns its TTL in seconds (0:
// the lease is gone). A lease's renewals all go over the same stream.
func (k *keeper) keepAliveOnce(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	k.sent.Add(1)
	return k.streams[uint64(id)%uint64(len(k.streams))].keepAliveOnce(ctx, id)
}

// keepStream is one of a keeper's streams.
type keepStream struct {
	leases func(ctx context.Context) etcdserverpb.LeaseClient
	sendMu sync.Mutex // one Send at a time

	mu      sync.Mutex
	stream  etcdserverpb.Lease_LeaseKeepAliveClient
	end     context.CancelFunc
	waiting map[int64][]chan keepAnswer
	// answered is when the current stream last answered anything.
	answered time.Time
}

type keepAnswer struct {
	ttl int64
	err error
}

// errKeeperStream is the stream's end, given to the calls it leaves
// unanswered (the next call opens a new stream).
var errKeeperStream = errors.New("store: lease keep-alive stream ended")

func (k *keepStream) keepAliveOnce(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	ch := make(chan keepAnswer, 1)
	k.mu.Lock()
	if k.stream == nil {
		// The stream outlives any one call: it ends only when it breaks.
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		st, err := k.leases(ctx).LeaseKeepAlive(sctx)
		if err != nil {
			cancel()
			k.mu.Unlock()
			return 0, err
		}
		k.stream, k.end, k.answered = st, cancel, time.Now()
		go k.receive(st)
	}
	st := k.stream
	sent := time.Now()
	k.waiting[int64(id)] = append(k.waiting[int64(id)], ch)
	k.mu.Unlock()
	// Not under mu: a Send held up by flow control must not keep receive
	// from reading the answers that would free it.
	k.sendMu.Lock()
	err := st.Send(&etcdserverpb.LeaseKeepAliveRequest{ID: int64(id)})
	k.sendMu.Unlock()
	if err != nil {
		k.broken(st, err)
	}
	select {
	case a := <-ch:
		return a.ttl, a.err
	case <-ctx.Done():
		k.mu.Lock()
		stuck := k.stream == st && k.answered.Before(sent)
		k.mu.Unlock()
		if stuck && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// etcd answers a stream's requests one after the other: a
			// member without a leader holds a renewal (and every one
			// behind it) for seconds. When the stream answered nothing
			// since this call's request, a new one, on the next member,
			// gets the next calls through. A stream that answers, only
			// slowly (etcd is loaded), is kept: ending it would fail every
			// call in flight.
			k.broken(st, ctx.Err())
		}
		return 0, ctx.Err()
	}
}

// receive hands the stream's answers out until it breaks.
func (k *keepStream) receive(st etcdserverpb.Lease_LeaseKeepAliveClient) {
	for {
		resp, err := st.Recv()
		if err != nil {
			k.broken(st, err)
			return
		}
		k.mu.Lock()
		k.answered = time.Now()
		if q := k.waiting[resp.ID]; len(q) > 0 {
			q[0] <- keepAnswer{ttl: resp.TTL}
			if len(q) == 1 {
				delete(k.waiting, resp.ID)
			} else {
				k.waiting[resp.ID] = q[1:]
			}
		}
		k.mu.Unlock()
	}
}

// broken ends stream st, if it is still the current one, and fails the
// calls waiting on it.
func (k *keepStream) broken(st etcdserverpb.Lease_LeaseKeepAliveClient, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stream != st {
		return
	}
	k.end()
	k.stream, k.end = nil, nil
	for id, q := range k.waiting {
		for _, ch := range q {
			ch <- keepAnswer{err: errors.Join(errKeeperStream, err)}
		}
		delete(k.waiting, id)
	}
}

// KeepAlivesSent returns how many lease keep-alives this connection has
// sent (the scale benchmark counts them per second: a replica's sessions
// share one lease, so the rate does not grow with the nodes it serves).
func (c *Client) KeepAlivesSent() int64 {
	if c.keeper == nil {
		return 0
	}
	return c.keeper.sent.Load()
}
