package scalebench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/beaconlb/beacon/pkg/grpcserve"
	"github.com/beaconlb/beacon/pkg/loopback"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// fleetEnv is what the reconnect part runs on: etcd (a 3-member cluster of
// etcd processes, or one embedded member when no binary is given) and
// several IPAM replicas in this process, each with its own etcd
// connection and gRPC server on loopback, as separate ipamd processes
// would have.
type fleetEnv struct {
	dir       string
	endpoints []string
	stopEtcd  func()
	replicas  []*fleetReplica
	conns     []*grpc.ClientConn // opened by dialAll
	// admin reaches etcd for the benchmark's own reads (leases).
	admin    *store.Store
	adminCli *store.Client
	logger   *slog.Logger
}

// fleetReplica is one in-process IPAM replica.
type fleetReplica struct {
	client *store.Client
	rep    *replica.Replica
	gs     *grpc.Server
	addr   string
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

func newFleetEnv(ctx context.Context, cfg Config, replicas int, heartbeat time.Duration) (env *fleetEnv, err error) {
	dir, err := os.MkdirTemp("", "ipam-scale-reconnect-")
	if err != nil {
		return nil, err
	}
	env = &fleetEnv{dir: dir, logger: slog.New(slog.NewTextHandler(cfg.Log, &slog.HandlerOptions{Level: slog.LevelError}))}
	defer func() {
		if err != nil {
			env.close()
		}
	}()
	if cfg.Etcd != "" {
		env.endpoints, env.stopEtcd, err = startEtcdMembers(ctx, cfg.Etcd, 3, dir)
	} else {
		var emb *store.Embedded
		emb, err = store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: dir, ClientURL: "http://127.0.0.1:0", LogLevel: "error"})
		if err == nil {
			env.endpoints, env.stopEtcd = emb.Endpoints(), emb.Close
		}
	}
	if err != nil {
		return nil, err
	}
	if env.adminCli, err = store.Dial(ctx, store.DialConfig{Endpoints: env.endpoints}); err != nil {
		return nil, err
	}
	env.admin = store.New(env.adminCli, env.logger, store.Options{})
	if err := waitReady(ctx, env.admin); err != nil {
		return nil, err
	}
	for range replicas {
		r, err := env.startReplica(ctx, heartbeat)
		if err != nil {
			return nil, err
		}
		env.replicas = append(env.replicas, r)
	}
	return env, nil
}

func waitReady(ctx context.Context, st *store.Store) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := st.Ready(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("etcd not ready: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *fleetEnv) startReplica(ctx context.Context, heartbeat time.Duration) (*fleetReplica, error) {
	client, err := store.Dial(ctx, store.DialConfig{Endpoints: e.endpoints})
	if err != nil {
		return nil, err
	}
	rep := replica.New(client, e.logger, replica.Options{Heartbeat: heartbeat})
	if err := rep.Load(ctx); err != nil {
		_ = client.Close()
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &fleetReplica{client: client, rep: rep, gs: grpc.NewServer(grpcserve.ServerOptions()...), addr: lis.Addr().String(), cancel: cancel}
	rep.Register(r.gs)
	r.wg.Go(func() { _ = rep.Run(runCtx) })
	r.wg.Go(func() { _ = r.gs.Serve(lis) })
	return r, nil
}

// crash ends the replica as a killed process ends: its etcd connection goes
// first (it revokes nothing and keeps no lease alive), then its gRPC
// connections break.
func (r *fleetReplica) crash() {
	r.once.Do(func() {
		_ = r.client.Close()
		r.gs.Stop()
		r.cancel()
		r.wg.Wait()
	})
}

// dial opens n client connections to the replica.
func (r *fleetReplica) dial(n int) ([]*grpc.ClientConn, error) {
	conns := make([]*grpc.ClientConn, n)
	for i := range conns {
		c, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		conns[i] = c
	}
	return conns, nil
}

// dialAll opens perReplica client connections to each replica, by
// replica; close closes them.
func (e *fleetEnv) dialAll(perReplica int) ([][]*grpc.ClientConn, error) {
	conns := make([][]*grpc.ClientConn, len(e.replicas))
	for i, r := range e.replicas {
		cs, err := r.dial(perReplica)
		if err != nil {
			return nil, err
		}
		conns[i] = cs
		e.conns = append(e.conns, cs...)
	}
	return conns, nil
}

// keepAlivesSent is the lease keep-alives every replica has sent so far.
func (e *fleetEnv) keepAlivesSent() int64 {
	var n int64
	for _, r := range e.replicas {
		n += r.client.KeepAlivesSent()
	}
	return n
}

func (e *fleetEnv) close() {
	for _, c := range e.conns {
		_ = c.Close()
	}
	for _, r := range e.replicas {
		r.crash()
	}
	if e.adminCli != nil {
		_ = e.adminCli.Close()
	}
	if e.stopEtcd != nil {
		e.stopEtcd()
	}
	_ = os.RemoveAll(e.dir)
}

// startEtcdMembers starts a cluster of etcd processes on loopback, fsync on
// as in production, and returns their client URLs; stop ends them (SIGTERM,
// SIGKILL after 10 s).
func startEtcdMembers(ctx context.Context, binary string, members int, dir string) ([]string, func(), error) {
	ports, err := loopback.FreePorts(2 * members)
	if err != nil {
		return nil, nil, err
	}
	var initial, endpoints []string
	for i := range members {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	var procs []*exec.Cmd
	stop := func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			done := make(chan struct{})
			go func() { _ = p.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = p.Process.Kill()
				<-done
			}
		}
	}
	for i := range members {
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		endpoints = append(endpoints, client)
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("m%d.log", i)))
		if err != nil {
			stop()
			return nil, nil, err
		}
		cmd := exec.CommandContext(context.WithoutCancel(ctx), binary, //nolint:gosec // the etcd binary the caller named
			"--name", fmt.Sprintf("m%d", i), "--data-dir", filepath.Join(dir, fmt.Sprintf("m%d", i)),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "ipam-scale", "--log-level", "warn")
		cmd.Stdout, cmd.Stderr = logf, logf
		err = cmd.Start()
		_ = logf.Close()
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("start etcd member %d: %w", i, err)
		}
		procs = append(procs, cmd)
	}
	return endpoints, stop, nil
}

var errTimeout = errors.New("timed out")
