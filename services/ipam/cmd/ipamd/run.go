package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"runtime/debug"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/beaconlb/beacon/pkg/grpcserve"
	"github.com/beaconlb/beacon/pkg/probe"
	"github.com/beaconlb/beacon/pkg/telemetry"
	"github.com/beaconlb/beacon/services/ipam/internal/access"
	"github.com/beaconlb/beacon/services/ipam/internal/etcdhealth"
	"github.com/beaconlb/beacon/services/ipam/internal/nodecert"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
	"github.com/beaconlb/beacon/services/ipam/internal/tokenreview"
)

// version is set at build time (make build, make images):
//
//	go build -ldflags "-X main.version=v1.2.3"
var version = "dev"

// run wires ipamd together and serves until ctx is done.
func run(ctx context.Context, cfg config, logger *slog.Logger) error {
	tel, err := telemetry.New(ctx, telemetry.Config{
		ServiceName: "beacon-ipamd", ServiceVersion: version,
		OTLPEndpoint: cfg.OTLPEndpoint, OTLPInsecure: cfg.OTLPInsecure,
	})
	if err != nil {
		return err
	}
	defer func() { _ = tel.ShutdownWithin(5 * time.Second) }()

	if cfg.MemoryLimit > 0 {
		debug.SetMemoryLimit(cfg.MemoryLimit)
	}
	if limit := debug.SetMemoryLimit(-1); limit != math.MaxInt64 {
		logger.InfoContext(ctx, "memory limit", "bytes", limit)
	}
	etcd, err := connectEtcd(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer func() { _ = etcd.close() }()
	rep := replica.New(etcd.client, logger, replica.Options{
		ReleaseHold: cfg.ReleaseHold, CommitWorkers: cfg.CommitWorkers, EtcdCallTimeout: cfg.EtcdTimeout, AuditRetention: cfg.AuditRetention,
		Meter: tel.MeterProvider.Meter("github.com/beaconlb/beacon/services/ipam"),
	})
	if err := rep.Load(ctx); err != nil {
		return err
	}
	// The load's garbage (etcd's chunks, the JSON they held) is about as
	// large as the state it built: hand it back to the OS now, not when the
	// runtime gets round to it, so that a replica's resident memory is its
	// state's (docs/operating.md, "Sizing").
	debug.FreeOSMemory()

	meter := tel.MeterProvider.Meter("github.com/beaconlb/beacon/services/ipam")
	var tokens access.Tokens
	if cfg.KubeAnnouncers != "" {
		kc, err := tokenreview.LoadConfig(cfg.KubeAnnouncers, os.Getenv)
		if err != nil {
			return err
		}
		r, err := tokenreview.New(kc, logger, tokenreview.Options{Meter: meter})
		if err != nil {
			return err
		}
		tokens = kubeTokens{r}
		logger.InfoContext(ctx, "announcers may authenticate with Kubernetes ServiceAccount tokens", "clusters", len(kc.Clusters))
	}
	guard, err := access.New(access.Options{
		TrustDomain: cfg.TrustDomain, Insecure: cfg.TLSClientCA == "", Pools: rep, Tokens: tokens,
		StreamsPerCaller: cfg.StreamsPerCaller, Meter: meter,
	}, logger)
	if err != nil {
		return err
	}
	var issuer *nodecert.Issuer
	if cfg.NodeIssuerCert != "" {
		if issuer, err = nodecert.LoadIssuer(cfg.NodeIssuerCert, cfg.NodeIssuerKey, cfg.NodeCertValidity); err != nil {
			return err
		}
	}
	certs, err := nodecert.New(store.NewBootstrapTokens(etcd.client, cfg.EtcdTimeout), issuer, cfg.TrustDomain, meter, logger)
	if err != nil {
		return err
	}
	if cfg.TLSClientCA == "" {
		logger.Warn("no --tls-client-ca: callers are not authenticated and every caller is an admin; use this on one machine only (see docs/security.md)")
	}
	opts := append(grpcserve.ServerOptions(), tel.GRPCServerOptions()...)
	opts = append(opts, grpc.ChainUnaryInterceptor(guard.Unary()), grpc.ChainStreamInterceptor(guard.Stream()))
	if cfg.TLSCert != "" {
		creds, err := serverTLS(cfg)
		if err != nil {
			return err
		}
		opts = append(opts, grpc.Creds(creds))
	}
	gs := grpc.NewServer(opts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	rep.Register(gs)
	certs.Register(gs)

	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	ops := probe.New(cfg.OpsListen, tel.MetricsHandler(), logger)
	ops.AddReadiness("etcd", rep.StorageReady)
	ops.AddReadiness("index", rep.IndexReady)
	if err := ops.Listen(ctx); err != nil {
		return err
	}

	// Storage, the index feed and expiry outlive the gRPC server, so that
	// requests in flight during a graceful stop can still commit.
	bgCtx, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBackground()
	bg, bgCtx := errgroup.WithContext(bgCtx)
	bg.Go(func() error { return rep.Run(bgCtx) })
	backend := etcdhealth.New(etcd.health(), logger, etcdhealth.Options{
		QuotaBytes: cfg.EtcdQuotaBytes, DefragFreeFraction: etcd.defragFree(cfg), Meter: meter,
	})
	bg.Go(func() error { return backend.Run(bgCtx) })

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ops.Run(gctx) })
	g.Go(func() error {
		logger.InfoContext(gctx, "ipamd serving", "listen", lis.Addr().String(), "ops", ops.Addr().String(), "version", version)
		if err := gs.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("grpc serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		select {
		case <-gctx.Done():
		case <-bgCtx.Done(): // storage gave up: stop serving
		}
		hs.Shutdown() // NOT_SERVING, so balancers move away first
		// Announcer sessions and watches never end on their own: end them
		// (clients reconnect elsewhere) so that GracefulStop only waits for
		// unary calls in flight.
		rep.StopStreams()
		done := make(chan struct{})
		go func() { gs.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(cfg.ShutdownGrace):
			gs.Stop()
		}
		return nil
	})
	err = g.Wait()
	stopBackground()
	err = errors.Join(err, bg.Wait())
	logger.Info("ipamd stopped", "clean", err == nil)
	return err
}

// serverTLS loads the server certificate and, if set, the client CA.
func serverTLS(cfg config) (credentials.TransportCredentials, error) {
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	if cfg.TLSClientCA != "" {
		pem, err := os.ReadFile(cfg.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("tls client ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls client ca %s: no certificates", cfg.TLSClientCA)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
		if cfg.KubeAnnouncers != "" || cfg.NodeIssuerCert != "" {
			// Announcers with a token, and nodes trading a bootstrap
			// token, present no certificate; a certificate, when given,
			// must still verify.
			tc.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	return credentials.NewTLS(tc), nil
}

// kubeTokens lets the guard authenticate announcers by their Kubernetes
// ServiceAccount token.
type kubeTokens struct{ r *tokenreview.Reviewer }

func (k kubeTokens) AnnouncerOf(ctx context.Context, token string) (string, string, error) {
	id, err := k.r.Authenticate(ctx, token)
	if errors.Is(err, tokenreview.ErrUnavailable) {
		return "", "", fmt.Errorf("%w: %w", access.ErrTokenUnavailable, err)
	}
	if err != nil {
		return "", "", err
	}
	return id.Tenant, id.Node, nil
}

// etcdConn is the replica's etcd client and what must stop with it.
type etcdConn struct {
	client *store.Client
	emb    *store.Embedded // nil with external etcd
}

// connectEtcd connects to the configured etcd cluster or, with no
// endpoints, starts etcd in this process and calls it in process (no
// socket in between; its client URL stays open for etcdctl and for other
// replicas).
func connectEtcd(ctx context.Context, cfg config, logger *slog.Logger) (*etcdConn, error) {
	if len(cfg.EtcdEndpoints) == 0 {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
		emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: cfg.DataDir, CompactionRetention: cfg.EtcdCompaction, QuotaBytes: cfg.EtcdQuotaBytes, Logger: logger})
		if err != nil {
			return nil, err
		}
		logger.InfoContext(ctx, "embedded etcd started", "data_dir", cfg.DataDir, "endpoints", emb.Endpoints())
		return &etcdConn{client: emb.Client(), emb: emb}, nil
	}
	dc := store.DialConfig{Endpoints: cfg.EtcdEndpoints, Username: cfg.EtcdUsername, Password: cfg.EtcdPassword}
	if cfg.EtcdCA != "" || cfg.EtcdCert != "" {
		tc, err := store.ClientTLS(cfg.EtcdCA, cfg.EtcdCert, cfg.EtcdKey)
		if err != nil {
			return nil, err
		}
		dc.TLS = tc
	}
	c, err := store.Dial(ctx, dc)
	if err != nil {
		return nil, err
	}
	return &etcdConn{client: c}, nil
}

// health is what etcdhealth asks: the embedded member, or the cluster.
func (c *etcdConn) health() etcdhealth.Source {
	if c.emb != nil {
		return c.emb
	}
	return c.client
}

// defragFree is the free share past which the replica defragments etcd:
// only its own embedded member; an external cluster is its operators' to
// defragment (docs/operating.md, "etcd maintenance").
func (c *etcdConn) defragFree(cfg config) float64 {
	if c.emb == nil {
		return 0
	}
	return cfg.EtcdDefragFree
}

// close closes the client, then stops the embedded etcd if there is one.
func (c *etcdConn) close() error {
	err := c.client.Close()
	if c.emb != nil {
		c.emb.Close()
	}
	return err
}
