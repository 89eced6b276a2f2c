package subscription_test

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/announce"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
	"github.com/beaconlb/beacon/services/ipam/internal/subscription"
)

// wait bounds every wait of these tests for something that must happen:
// generous, for a machine under a load of 10 and more.
const wait = 30 * time.Second

// env is a real store over an embedded etcd, and a real fleet hub fed by
// a watch of the store's node registrations, as a replica wires them.
type env struct {
	ctx   context.Context
	st    *store.Store
	state *announce.State
	hub   *announce.Hub
	nodes chan ipam.Event // every write and deletion of a node registration
	// granted receives every lease granted, in order.
	granted chan *recordedLease
	// adopted receives every lease a resuming session took over.
	adopted chan *recordedLease
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: t.TempDir(), LogLevel: "fatal"})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	st := store.New(emb.Client(), logger, store.Options{})
	e := &env{ctx: ctx, st: st, state: announce.NewState(), nodes: make(chan ipam.Event, 1000), granted: make(chan *recordedLease, 100), adopted: make(chan *recordedLease, 100)}
	hub := announce.NewHub(e.state, st, logger)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = st.Run(runCtx) })
	wg.Go(func() { _ = hub.Run(runCtx) })
	wg.Go(func() {
		_ = st.WatchKind(runCtx, ipam.KindNode, "", 0, func(evs []ipam.Event, rev int64) {
			e.state.Apply(evs, rev)
			for _, ev := range evs {
				e.nodes <- ev
			}
		})
	})
	t.Cleanup(func() { stop(); wg.Wait(); emb.Close() })
	e.hub = hub
	return e
}

// addPeer gives tenant t a BGP peer, which every node of it peers with.
func (e *env) addPeer(t, id string, rev int64) {
	peer := &ipam.BGPPeer{Tenant: t, ID: id, MyASN: 64512, PeerASN: 64512, PeerAddress: netip.MustParseAddr("198.51.100.1")}
	e.state.Apply([]ipam.Event{{Ref: ipam.Ref{Kind: ipam.KindBGPPeer, ID: t + "/" + id}, Value: peer, Rev: rev}}, rev)
}

func (e *env) config(heartbeat time.Duration, stopping <-chan struct{}) subscription.Config {
	return subscription.Config{
		Leaser: leaser{e}, Feed: hubFeed{e.hub}, Heartbeat: heartbeat, Stopping: stopping,
		Logger: slog.New(slog.DiscardHandler),
	}
}

// lease returns the next lease granted.
func (e *env) lease(t *testing.T) *recordedLease {
	t.Helper()
	select {
	case l := <-e.granted:
		return l
	case <-time.After(wait):
		t.Fatalf("no lease granted within %s", wait)
		return nil
	}
}

// nextNode returns the next write or deletion of a node registration.
func (e *env) nextNode(t *testing.T) ipam.Event {
	t.Helper()
	select {
	case ev := <-e.nodes:
		return ev
	case <-time.After(wait):
		t.Fatalf("no node registration written or deleted within %s", wait)
		return ipam.Event{}
	}
}

// noNodeWrite fails if a node registration is written or deleted within d.
func (e *env) noNodeWrite(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case ev := <-e.nodes:
		t.Fatalf("node registration written or deleted: %+v", ev)
	case <-time.After(d):
	}
}

// hubFeed feeds sessions their plans from the hub (as the server does).
type hubFeed struct{ hub *announce.Hub }

func (f hubFeed) Subscribe(tenant, node string, holds func(*ipam.NodePlan) bool) (subscription.Plans, func()) {
	s := f.hub.AttachHolding(tenant, node, holds)
	return s, func() { f.hub.Detach(s) }
}

// leaser grants real etcd leases, recorded.
type leaser struct{ e *env }

func (l leaser) GrantLease(ctx context.Context, ttl time.Duration) (subscription.Lease, error) {
	sl, err := l.e.st.GrantLease(ctx, ttl)
	if err != nil {
		return nil, err
	}
	rl := &recordedLease{Lease: sl}
	l.e.granted <- rl
	return rl, nil
}

func (l leaser) AdoptLease(ctx context.Context, r ipam.Ref, value any) (subscription.Lease, error) {
	sl, err := l.e.st.AdoptLease(ctx, r, value)
	if err != nil {
		return nil, err
	}
	rl := &recordedLease{Lease: sl}
	l.e.adopted <- rl
	return rl, nil
}

// id returns the etcd ID of a recorded lease.
func (l *recordedLease) id() int64 { return l.Lease.(*store.Lease).ID() }

// errInjected is a report write made to fail.
var errInjected = errors.New("injected: etcd out of reach")

// recordedLease is a real lease that records the grace it is kept alive
// with and when each write started, and can be made to fail writes.
type recordedLease struct {
	subscription.Lease

	mu       sync.Mutex
	grace    time.Duration
	puts     []time.Time
	failPuts int // how many of the next writes fail
}

func (l *recordedLease) KeepAlive(ctx context.Context, grace time.Duration) error {
	l.mu.Lock()
	l.grace = grace
	l.mu.Unlock()
	return l.Lease.KeepAlive(ctx, grace)
}

func (l *recordedLease) Put(ctx context.Context, r ipam.Ref, value any) (int64, error) {
	l.mu.Lock()
	l.puts = append(l.puts, time.Now())
	fail := l.failPuts > 0
	if fail {
		l.failPuts--
	}
	l.mu.Unlock()
	if fail {
		return 0, errInjected
	}
	return l.Lease.Put(ctx, r, value)
}

func (l *recordedLease) record() (time.Duration, []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.grace, append([]time.Time(nil), l.puts...)
}
