package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	// The raw baseline is the etcd client itself, and a replica is built
	// over one: the benchmark is the one place besides the store that
	// needs it.
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/beaconlb/beacon/pkg/grpcserve"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// etcdEnv is the etcd the run measures: embedded in this process, or in a
// child process (see ServeEtcd), on disk in a fresh temporary directory,
// with fsync on as in production, listening on loopback only.
type etcdEnv struct {
	dir       string
	endpoints []string
	// client reaches etcd over loopback: the raw references use it.
	client *store.Client
	// replica is the replica's client: in process when etcd is embedded
	// here (as ipamd does), else client.
	replica *store.Client
	// leader reaches only the leader's endpoint, for the rawleader
	// reference (a cluster only; nil otherwise).
	leader *store.Client
	stop   func() error
}

// startEtcd starts etcd in this process, with command (not nil) in a child
// process that runs ServeEtcd, or, with cluster.Binary set, as a cluster of
// real etcd processes.
func startEtcd(ctx context.Context, command []string, cluster EtcdCluster, dial, leaderRef bool, logger *slog.Logger) (env *etcdEnv, err error) {
	dir, err := os.MkdirTemp("", "ipam-bench-")
	if err != nil {
		return nil, err
	}
	env = &etcdEnv{dir: dir}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	switch {
	case cluster.Binary != "":
		if env.endpoints, env.stop, err = startCluster(ctx, cluster.Binary, max(cluster.Members, 1), dir); err != nil {
			return nil, err
		}
	case command == nil:
		emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: dir, ClientURL: "http://127.0.0.1:0", Logger: logger})
		if err != nil {
			return nil, err
		}
		env.endpoints = emb.Endpoints()
		env.stop = func() error { emb.Close(); return nil }
		if !dial {
			env.replica = emb.Client()
		}
	default:
		if env.endpoints, env.stop, err = startChild(ctx, command, dir); err != nil {
			return nil, err
		}
	}
	env.client, err = store.Dial(ctx, store.DialConfig{Endpoints: env.endpoints})
	if err != nil {
		return nil, errors.Join(err, env.stop())
	}
	if env.replica == nil {
		env.replica = env.client
	}
	if len(env.endpoints) > 1 && leaderRef {
		if env.leader, err = dialLeader(ctx, env.client, env.endpoints); err != nil {
			return nil, errors.Join(err, env.close())
		}
	}
	return env, nil
}

// dialLeader connects to the endpoint of the cluster's leader only,
// looking for it for up to 10 s (an election may be under way).
func dialLeader(ctx context.Context, c *store.Client, endpoints []string) (*store.Client, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, ep := range endpoints {
			st, err := c.Etcd().Status(ctx, ep)
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return store.Dial(ctx, store.DialConfig{Endpoints: []string{ep}})
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no leader among %v", endpoints)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// close stops etcd and removes its data.
func (e *etcdEnv) close() error {
	if e.leader != nil {
		_ = e.leader.Close()
	}
	if e.replica != e.client {
		_ = e.replica.Close() // etcd is stopping anyway
	}
	_ = e.client.Close()
	return errors.Join(e.stop(), os.RemoveAll(e.dir))
}

// revision returns etcd's current revision. Every transaction that writes
// adds one, so the difference over a window counts the transactions
// committed in it.
func (e *etcdEnv) revision(ctx context.Context) (int64, error) {
	resp, err := e.client.Etcd().Get(ctx, "/bench/revision", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("read etcd revision: %w", err)
	}
	return resp.Header.Revision, nil
}

// rawValue is the value of the raw transactions: about the size of a stored
// allocation.
var rawValue = `{"pad":"` + strings.Repeat("x", 200-len(`{"pad":""}`)) + `"}`

// rawOp commits allocation-shaped transactions: create a fresh key under
// prefix if it does not exist.
func rawOp(client *clientv3.Client, prefix string) opFunc {
	return func(ctx context.Context, w, seq int) error {
		k := fmt.Sprintf("%s%d/%d", prefix, w, seq)
		resp, err := client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, rawValue)).
			Commit()
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			return fmt.Errorf("key %s already exists", k)
		}
		return nil
	}
}

// raw3Op commits the writes of one allocation as etcd alone would: create
// an allocation-sized and a claim-sized key if neither exists, and put an
// audit-sized key tied to a lease, in one transaction. It is a reference,
// not a bar: the difference between it and Beacon is Beacon's own cost.
func raw3Op(client *clientv3.Client, prefix string, lease clientv3.LeaseID) opFunc {
	return func(ctx context.Context, w, seq int) error {
		k := fmt.Sprintf("%s%d/%d", prefix, w, seq)
		resp, err := client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(k+"/a"), "=", 0), clientv3.Compare(clientv3.CreateRevision(k+"/c"), "=", 0)).
			Then(clientv3.OpPut(k+"/a", raw3Alloc), clientv3.OpPut(k+"/c", raw3Claim), clientv3.OpPut(k+"/l", raw3Audit, clientv3.WithLease(lease))).
			Commit()
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			return fmt.Errorf("keys %s/* already exist", k)
		}
		return nil
	}
}

// Sizes of the stored allocation, claim and audit record of one bench
// allocation (JSON), for raw3Op.
var (
	raw3Alloc = strings.Repeat("a", 330)
	raw3Claim = strings.Repeat("c", 110)
	raw3Audit = strings.Repeat("l", 260)
)

// Pool and tenant of the Beacon measurement. The pool is IPv6
// documentation space, big enough never to run out; its addresses are
// only written to etcd, never sent traffic.
const (
	benchPool   = "bench"
	benchTenant = "bench"
	benchRange  = "2001:db8::/64"
)

// beaconNode is one replica serving gRPC on 127.0.0.1, and a client
// connection to it.
type beaconNode struct {
	conn   *grpc.ClientConn
	allocs ipamv1.AllocationServiceClient
	health healthpb.HealthClient
	stop   func() error
}

func startBeacon(ctx context.Context, client *store.Client, logger *slog.Logger, opts replica.Options) (*beaconNode, error) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rep := replica.New(client, logger, opts)
	if err := rep.Load(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("load replica: %w", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		return nil, err
	}
	gs := grpc.NewServer(grpcserve.ServerOptions()...) // as ipamd, less its telemetry
	healthpb.RegisterHealthServer(gs, health.NewServer())
	rep.Register(gs)
	var wg sync.WaitGroup
	var runErr, serveErr error
	wg.Go(func() { runErr = rep.Run(runCtx) })
	wg.Go(func() { serveErr = gs.Serve(lis) })
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			if conn != nil {
				_ = conn.Close() // the server is stopping anyway
			}
			rep.StopStreams() // as ipamd: sessions leave their registrations to expire with the replica lease
			gs.Stop()
			cancel()
			wg.Wait()
			if errors.Is(serveErr, grpc.ErrServerStopped) {
				serveErr = nil
			}
			stopErr = errors.Join(runErr, serveErr)
		})
		return stopErr
	}
	if err != nil {
		return nil, errors.Join(err, stop())
	}
	n := &beaconNode{conn: conn, allocs: ipamv1.NewAllocationServiceClient(conn), health: healthpb.NewHealthClient(conn), stop: stop}
	pools := ipamv1.NewPoolServiceClient(conn)
	if _, err := pools.CreatePool(ctx, &ipamv1.CreatePoolRequest{
		PoolId: benchPool,
		Pool:   &ipamv1.Pool{Description: "ipam-bench", Ranges: []string{benchRange}},
	}); err != nil && status.Code(err) != codes.AlreadyExists { // a second replica on the same etcd
		return nil, errors.Join(fmt.Errorf("create pool: %w", err), stop())
	}
	return n, nil
}

// echoOp is a gRPC round trip to the replica's server that does nothing:
// a health check, answered from memory.
func (n *beaconNode) echoOp(string) opFunc {
	return func(ctx context.Context, _, _ int) error {
		_, err := n.health.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
}

// allocOp allocates one IPv6 address for a fresh owner per call; run tells
// measurements apart, so owners never repeat.
func (n *beaconNode) allocOp(run string) opFunc {
	families := []ipamv1.IPFamily{ipamv1.IPFamily_IP_FAMILY_IPV6}
	return func(ctx context.Context, w, seq int) error {
		owner := fmt.Sprintf("bench/%s-w%d-%d", run, w, seq)
		resp, err := n.allocs.Allocate(ctx, &ipamv1.AllocateRequest{
			Parent:     "tenants/" + benchTenant,
			Allocation: &ipamv1.Allocation{Owner: owner, IpFamilies: families},
		})
		if err != nil {
			return fmt.Errorf("allocate %s: %w", owner, err)
		}
		if !resp.GetCreated() || len(resp.GetAllocation().GetAddresses()) != 1 {
			return fmt.Errorf("allocate %s: got created=%v addresses %v", owner, resp.GetCreated(), resp.GetAllocation().GetAddresses())
		}
		return nil
	}
}
