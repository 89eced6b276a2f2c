package replica_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/access"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// etcdEnv is a real embedded etcd for one test. client calls it in
// process, as ipamd does when it embeds etcd; dial gives clients that reach
// it over loopback, as replicas on an external etcd do.
type etcdEnv struct {
	dir    string
	emb    *store.Embedded
	client *store.Client
	dialed []*store.Client
	killed bool // etcd stopped by the test; the clients remain
}

// kill stops etcd and leaves the clients trying to reach it, as when an
// etcd member dies.
func (e *etcdEnv) kill() {
	if !e.killed {
		e.killed = true
		e.emb.Close()
	}
}

func startEtcd(t *testing.T, dir string) *etcdEnv {
	t.Helper()
	e, err := openEtcd(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.stop)
	return e
}

// openEtcd starts an embedded etcd in dir with an in-process client.
func openEtcd(dir string) (*etcdEnv, error) {
	emb, err := store.StartEmbedded(context.Background(), store.EmbeddedConfig{Dir: dir, LogLevel: "fatal"})
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	return &etcdEnv{dir: dir, emb: emb, client: emb.Client()}, nil
}

// dial returns a new client that reaches etcd over loopback; stop closes it.
func (e *etcdEnv) dial(t *testing.T) *store.Client {
	t.Helper()
	c, err := store.Dial(ctxT(t), store.DialConfig{Endpoints: e.emb.Endpoints()})
	if err != nil {
		t.Fatalf("dial etcd: %v", err)
	}
	e.dialed = append(e.dialed, c)
	return c
}

func (e *etcdEnv) stop() {
	if e.emb == nil {
		return
	}
	for _, c := range append(e.dialed, e.client) {
		_ = c.Close()
	}
	if !e.killed {
		e.emb.Close()
	}
	e.emb = nil
}

// clock is a test clock: real time plus an offset the test moves.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// node is one IPAM replica serving gRPC on loopback.
type node struct {
	addr   string // the gRPC address
	pools  ipamv1.PoolServiceClient
	allocs ipamv1.AllocationServiceClient
	audit  ipamv1.AuditServiceClient
	groups ipamv1.GlobalGroupServiceClient
	ann    ipamv1.AnnouncementServiceClient
	stop   func()
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func startNode(t *testing.T, client *store.Client, opts replica.Options) *node {
	t.Helper()
	return startNodeWith(t, client, discard(), opts)
}

// startNodeWith starts a replica that logs to logger.
func startNodeWith(t *testing.T, client *store.Client, logger *slog.Logger, opts replica.Options) *node {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rep := replica.New(client, logger, opts)
	if err := rep.Load(ctx); err != nil {
		cancel()
		t.Fatalf("load: %v", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	// As ipamd without client certificates: every caller an admin, the
	// gateway's beacon-actor believed.
	guard, err := access.New(access.Options{TrustDomain: "beacon", Insecure: true, Pools: rep}, logger)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(guard.Unary()), grpc.ChainStreamInterceptor(guard.Stream()))
	rep.Register(gs)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = rep.Run(ctx) }()
	go func() { defer wg.Done(); _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var once sync.Once
	n := &node{
		addr:   lis.Addr().String(),
		pools:  ipamv1.NewPoolServiceClient(conn),
		allocs: ipamv1.NewAllocationServiceClient(conn),
		audit:  ipamv1.NewAuditServiceClient(conn),
		groups: ipamv1.NewGlobalGroupServiceClient(conn),
		ann:    ipamv1.NewAnnouncementServiceClient(conn),
		stop: func() {
			once.Do(func() {
				_ = conn.Close()
				gs.Stop()
				cancel()
				waitStopped(t, &wg)
			})
		},
	}
	t.Cleanup(n.stop)
	return n
}

// waitStopped waits for a replica's goroutines to end; if they have not
// after 30 s, it fails the test with every goroutine's stack (a hung
// shutdown is a bug, and the stacks say where) instead of hanging until the
// test binary's timeout.
func waitStopped(t *testing.T, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		var b strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
		t.Errorf("replica did not stop within 30s; goroutines:\n%s", b.String())
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustPool(t *testing.T, n *node, id string, p *ipamv1.Pool) *ipamv1.Pool {
	t.Helper()
	resp, err := n.pools.CreatePool(ctxT(t), &ipamv1.CreatePoolRequest{PoolId: id, Pool: p})
	if err != nil {
		t.Fatalf("create pool %s: %v", id, err)
	}
	return resp.GetPool()
}

func allocate(ctx context.Context, n *node, tenant string, a *ipamv1.Allocation) (*ipamv1.Allocation, error) {
	resp, err := n.allocs.Allocate(ctx, &ipamv1.AllocateRequest{Parent: "tenants/" + tenant, Allocation: a})
	return resp.GetAllocation(), err
}

func mustAllocate(t *testing.T, n *node, tenant string, a *ipamv1.Allocation) *ipamv1.Allocation {
	t.Helper()
	got, err := allocate(ctxT(t), n, tenant, a)
	if err != nil {
		t.Fatalf("allocate %s: %v", a.GetOwner(), err)
	}
	return got
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want code %v", err, code)
	}
}
