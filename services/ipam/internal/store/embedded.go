package store

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Embedded is an etcd server running inside this process, for a one-command
// IPAM and for tests.
type Embedded struct {
	etcd      *embed.Etcd
	closeOnce sync.Once
	// killed makes the member refuse every client call (see Kill).
	killed *atomic.Bool
}

// DefaultQuotaBytes is the embedded etcd's default backend quota: 8 GiB,
// etcd's recommended maximum, about eight times what a million allocations
// take (see docs/operating.md, "Sizing").
const DefaultQuotaBytes = 8 << 30

// EmbeddedConfig configures an embedded etcd.
type EmbeddedConfig struct {
	// Dir holds etcd's data; it survives restarts.
	Dir string
	// ClientURL is where etcd listens for clients; default
	// http://127.0.0.1:0 (a free port, read back with Endpoints).
	ClientURL string
	// LogLevel is etcd's own log level (default "error").
	LogLevel string
	// Logger, if set, receives etcd's log (see etcdLogger); else etcd
	// writes its own JSON lines to stderr.
	Logger *slog.Logger
	// CompactionRetention is how much history etcd keeps, which bounds how
	// old a watch resume token may be (default 1h).
	CompactionRetention time.Duration
	// QuotaBytes is the most the backend database may grow to before etcd
	// raises its NOSPACE alarm and refuses writes (default
	// DefaultQuotaBytes; etcd's own default is 2 GiB).
	QuotaBytes int64
	// Name, PeerURL and InitialCluster make the member one of a cluster
	// ("m0", "http://127.0.0.1:P", "m0=http://...,m1=http://..."), for
	// tests of member loss; the members must be started concurrently (each
	// waits for a quorum). Empty: a cluster of one.
	Name, PeerURL, InitialCluster string
}

// StartEmbedded starts etcd in this process and waits until it serves.
func StartEmbedded(ctx context.Context, c EmbeddedConfig) (*Embedded, error) {
	cfg := embed.NewConfig()
	cfg.Name = "beacon"
	if c.Name != "" {
		cfg.Name = c.Name
	}
	cfg.Dir = c.Dir
	client := c.ClientURL
	if client == "" {
		client = "http://127.0.0.1:0"
	}
	cu, err := url.Parse(client)
	if err != nil {
		return nil, fmt.Errorf("store: embedded etcd client url %q: %w", client, err)
	}
	peer := c.PeerURL
	if peer == "" {
		peer = "http://127.0.0.1:0"
	}
	pu, err := url.Parse(peer)
	if err != nil {
		return nil, fmt.Errorf("store: embedded etcd peer url %q: %w", peer, err)
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if c.InitialCluster != "" {
		cfg.InitialCluster = c.InitialCluster
	}
	cfg.LogLevel = c.LogLevel
	if cfg.LogLevel == "" {
		cfg.LogLevel = "error"
	}
	cfg.LogOutputs = []string{"stderr"}
	if c.Logger != nil {
		lvl, err := zapcore.ParseLevel(cfg.LogLevel)
		if err != nil {
			return nil, fmt.Errorf("store: embedded etcd log level %q: %w", cfg.LogLevel, err)
		}
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(etcdLogger(c.Logger, lvl))
	}
	retention := c.CompactionRetention
	if retention <= 0 {
		retention = time.Hour
	}
	// A killed member refuses client calls at once: between its hard stop
	// (which closes its storage) and the end of its gRPC servers, a call
	// would reach the closed storage, and etcd would panic (Status does).
	killed := new(atomic.Bool)
	refuse := func() error {
		if killed.Load() {
			return status.Error(codes.Unavailable, "store: embedded etcd member killed")
		}
		return nil
	}
	cfg.GRPCAdditionalServerOptions = append(cfg.GRPCAdditionalServerOptions,
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := refuse(); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := refuse(); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	)
	cfg.QuotaBackendBytes = c.QuotaBytes
	if cfg.QuotaBackendBytes <= 0 {
		cfg.QuotaBackendBytes = DefaultQuotaBytes
	}
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = retention.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("store: start embedded etcd in %s: %w", c.Dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return &Embedded{etcd: e, killed: killed}, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("store: embedded etcd failed: %w", err)
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("store: embedded etcd not ready after 60s")
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
}

// Endpoints returns the client URLs etcd listens on.
func (e *Embedded) Endpoints() []string {
	out := make([]string, 0, len(e.etcd.Clients))
	for _, l := range e.etcd.Clients {
		out = append(out, "http://"+l.Addr().String())
	}
	return out
}

// Client returns a client that calls this etcd server in process, without
// a socket or protobuf encoding in between: what ipamd uses when it embeds
// etcd (what that saves is in docs/performance.md). Close it before the
// server.
func (e *Embedded) Client() *Client {
	kv := v3rpc.NewQuotaKVServer(e.etcd.Server)
	return &Client{
		etcd:     v3client.New(e.etcd.Server),
		kv:       adapter.KvServerToKvClient(kv),
		kvServer: kv,
		keeper: newKeeper(func(context.Context) etcdserverpb.LeaseClient {
			return adapter.LeaseServerToLeaseClient(v3rpc.NewQuotaLeaseServer(e.etcd.Server))
		}),
	}
}

// Err reports a fatal etcd error.
func (e *Embedded) Err() <-chan error { return e.etcd.Err() }

// Close stops etcd; closing again does nothing.
func (e *Embedded) Close() { e.closeOnce.Do(e.etcd.Close) }

// Kill stops the member at once, as a crash would (a leader does not hand
// its leadership over first, as Close lets it), then closes it. For tests
// of member loss.
func (e *Embedded) Kill() {
	e.closeOnce.Do(func() {
		e.killed.Store(true)
		e.etcd.Server.HardStop()
		e.etcd.Close()
	})
}

// IsLeader reports whether this member leads its cluster (for tests that
// stop the leader).
func (e *Embedded) IsLeader() bool { return e.etcd.Server.Leader() == e.etcd.Server.MemberID() }
