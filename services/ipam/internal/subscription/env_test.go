package subscription_test

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

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
// Sessions run on test replicas (replica): each its own replica lease over
// the same store, as replicas of one etcd.
type env struct {
	ctx   context.Context
	st    *store.Store
	cli   *store.Client
	state *announce.State
	hub   *announce.Hub
	nodes chan ipam.Event // every write and deletion of a node registration
	// granted receives every lease granted, in order, by any replica.
	granted chan *recordedLease
	// a is the replica e.config's sessions run on.
	a *replica
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
	e := &env{ctx: ctx, st: st, cli: emb.Client(), state: announce.NewState(), nodes: make(chan ipam.Event, 1000), granted: make(chan *recordedLease, 100)}
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
	e.a = e.replica(t)
	return e
}

// replica is a test replica: its lease, kept alive until stop (or the
// test's end); stop leaves it to expire, as a replica that stops or dies.
type replica struct {
	lease *subscription.ReplicaLease
	stop  func()

	mu   sync.Mutex
	held *recordedLease // the last lease it was granted
}

// replica starts a test replica on e's store.
func (e *env) replica(t *testing.T) *replica {
	t.Helper()
	r := &replica{}
	r.lease = subscription.NewReplicaLease(granter{e: e, r: r}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.lease.Run(ctx) }()
	var once sync.Once
	r.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(r.stop)
	return r
}

// last returns the lease the replica was last granted.
func (r *replica) last(t *testing.T) *recordedLease {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil {
		t.Fatal("the replica was granted no lease")
	}
	return r.held
}

// addPeer gives tenant t a BGP peer, which every node of it peers with.
func (e *env) addPeer(t, id string, rev int64) {
	peer := &ipam.BGPPeer{Tenant: t, ID: id, MyASN: 64512, PeerASN: 64512, PeerAddress: netip.MustParseAddr("198.51.100.1")}
	e.state.Apply([]ipam.Event{{Ref: ipam.Ref{Kind: ipam.KindBGPPeer, ID: t + "/" + id}, Value: peer, Rev: rev}}, rev)
}

// config is the sessions' config on replica e.a.
func (e *env) config(heartbeat time.Duration, stopping <-chan struct{}) subscription.Config {
	return e.configOn(e.a, heartbeat, stopping)
}

// configOn is the sessions' config on replica r.
func (e *env) configOn(r *replica, heartbeat time.Duration, stopping <-chan struct{}) subscription.Config {
	return subscription.Config{
		Leases: r.lease, Feed: hubFeed{e.hub}, Heartbeat: heartbeat, Stopping: stopping,
		Logger: slog.New(slog.DiscardHandler),
	}
}

// noGrant fails if a lease was granted and not yet taken from e.granted.
func (e *env) noGrant(t *testing.T) {
	t.Helper()
	select {
	case l := <-e.granted:
		t.Errorf("a lease was granted: %x", l.id())
	default:
	}
}

// revoke revokes lease l in etcd, behind its holder's back.
func (e *env) revoke(t *testing.T, l *recordedLease) {
	t.Helper()
	if _, err := e.cli.Etcd().Revoke(e.ctx, clientv3.LeaseID(l.id())); err != nil {
		t.Fatal(err)
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

// granter grants real etcd leases for replica r, recorded.
type granter struct {
	e *env
	r *replica
}

func (g granter) GrantLease(ctx context.Context, ttl time.Duration) (subscription.KeptLease, error) {
	sl, err := g.e.st.GrantLease(ctx, ttl)
	if err != nil {
		return nil, err
	}
	rl := &recordedLease{l: sl}
	g.r.mu.Lock()
	g.r.held = rl
	g.r.mu.Unlock()
	g.e.granted <- rl
	return rl, nil
}

// id returns the etcd ID of a recorded lease.
func (l *recordedLease) id() int64 { return l.l.ID() }

// errInjected is a report write made to fail.
var errInjected = errors.New("injected: etcd out of reach")

// recordedLease is a real lease that records the grace it is kept alive
// with and when each write of a registration tied to it started, and can
// be made to fail those writes.
type recordedLease struct {
	l *store.Lease

	mu       sync.Mutex
	grace    time.Duration
	puts     []time.Time
	failPuts int // how many of the next writes fail
}

func (l *recordedLease) KeepAlive(ctx context.Context, grace time.Duration) error {
	l.mu.Lock()
	l.grace = grace
	l.mu.Unlock()
	return l.l.KeepAlive(ctx, grace)
}

func (l *recordedLease) AliveUntil() time.Time { return l.l.AliveUntil() }

func (l *recordedLease) Tie(r ipam.Ref) subscription.Registration {
	return &recordedTie{Tie: l.l.Tie(r), l: l}
}

// recordedTie is a registration whose writes its lease records.
type recordedTie struct {
	*store.Tie
	l *recordedLease
}

func (t *recordedTie) Put(ctx context.Context, value any) (int64, error) {
	l := t.l
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
	return t.Tie.Put(ctx, value)
}

func (l *recordedLease) record() (time.Duration, []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.grace, append([]time.Time(nil), l.puts...)
}
