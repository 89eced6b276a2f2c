package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/beaconlb/beacon/pkg/probe"
	"github.com/beaconlb/beacon/pkg/telemetry"
	"github.com/beaconlb/beacon/services/announcer/bootstrap"
	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/internal/ipamclient"
	"github.com/beaconlb/beacon/services/announcer/internal/l2"
	"github.com/beaconlb/beacon/services/announcer/internal/links"
	"github.com/beaconlb/beacon/services/announcer/internal/localaddr"
	"github.com/beaconlb/beacon/services/announcer/internal/reconcile"
	"github.com/beaconlb/beacon/services/announcer/internal/tenure"
)

// version is set at build time (make build, make images):
//
//	go build -ldflags "-X main.version=v1.2.3"
var version = "dev"

func run(ctx context.Context, cfg config, logger *slog.Logger) error {
	tel, err := telemetry.New(ctx, telemetry.Config{ServiceName: "beacon-announcerd", ServiceVersion: version, OTLPEndpoint: cfg.OTLPEndpoint})
	if err != nil {
		return err
	}
	defer func() { _ = tel.ShutdownWithin(5 * time.Second) }()

	itfs, err := links.List()
	if err != nil {
		return err
	}
	itfs = without(itfs, cfg.LocalDevice)
	routerID := cfg.RouterID
	if !routerID.IsValid() {
		if routerID = firstIPv4(itfs); !routerID.IsValid() {
			return errors.New("no IPv4 address on any interface for the BGP router ID; set --router-id")
		}
	}

	if cfg.BootstrapTokenFile != "" {
		if cfg.TLSCert, cfg.TLSKey, err = nodeCertificate(ctx, cfg, logger); err != nil {
			return err
		}
	}
	dial, err := dialOptions(cfg)
	if err != nil {
		return err
	}
	dial = append(dial, tel.GRPCDialOptions()...)
	conns := make([]grpc.ClientConnInterface, 0, len(cfg.IPAM))
	for _, addr := range cfg.IPAM {
		cc, err := grpc.NewClient(addr, dial...)
		if err != nil {
			return fmt.Errorf("ipam %s: %w", addr, err)
		}
		defer func() { _ = cc.Close() }()
		conns = append(conns, cc)
	}
	// The node's right to answer for its L2 addresses: granted by the IPAM
	// session, taking effect once the reconciler has installed the plan it
	// was granted for, asked by the responder at every frame it sends.
	rights := tenure.New()
	client := ipamclient.New(conns, ipamclient.Identity{Tenant: cfg.Tenant, Node: cfg.Node, Labels: cfg.Labels}, logger, ipamclient.Options{Grace: cfg.Grace, Rights: rights})
	responder := l2.New(logger, l2.Options{Rights: rights, Probe: l2.DefaultProbe()})
	speaker := bgp.New(logger, bgp.Options{RouterID: routerID, KeepRoutesOnExit: cfg.KeepRoutesOnExit})
	var l2set reconcile.Responder = responder
	var local *localaddr.Device
	if cfg.LocalDevice != "" {
		local = localaddr.New(cfg.LocalDevice, logger, localaddr.Options{})
		l2set = reconcile.Responders{local, responder}
	}
	rec := reconcile.New(l2set, responder, rights, speaker, client, logger)
	if err := observe(tel.MeterProvider.Meter("github.com/beaconlb/beacon/services/announcer"), speaker, responder, rights); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}

	ops := probe.New(cfg.OpsListen, tel.MetricsHandler(), logger)
	changes := make(chan []links.Interface, 1)
	changes <- itfs
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return client.Run(gctx) })
	g.Go(func() error { return responder.Run(gctx) })
	g.Go(func() error { return speaker.Run(gctx) })
	g.Go(func() error { return rec.Run(gctx, changes) })
	g.Go(func() error { return serveOps(gctx, ops) })
	if local != nil {
		g.Go(func() error { return local.Run(gctx) })
	}
	g.Go(func() error {
		return links.Watch(gctx, logger, func(l []links.Interface) {
			select { // keep only the latest
			case <-changes:
			default:
			}
			changes <- without(l, cfg.LocalDevice)
		})
	})
	logger.InfoContext(ctx, "announcerd running", "tenant", cfg.Tenant, "node", cfg.Node, "router_id", routerID, "ipam", cfg.IPAM, "ops", cfg.OpsListen, "version", version)
	err = g.Wait()
	logger.Info("announcerd stopped", "clean", err == nil)
	return err
}

// serveOps serves the ops endpoint. An address still held (by the previous
// announcerd that a supervisor has just replaced, say) is retried until it
// is free rather than ending the process: the node keeps announcing while
// its metrics and probes wait, and a supervisor sees no crash loop.
func serveOps(ctx context.Context, ops *probe.Server) error {
	if err := ops.ListenRetrying(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return ops.Run(ctx) // returns nil at once if ctx ended first
}

// without leaves out the local-addresses device: its addresses are the
// service addresses themselves, not the node's, and nothing is announced
// on it.
func without(itfs []links.Interface, name string) []links.Interface {
	if name == "" {
		return itfs
	}
	return slices.DeleteFunc(itfs, func(i links.Interface) bool { return i.Name == name })
}

func firstIPv4(itfs []links.Interface) netip.Addr {
	for _, i := range itfs {
		for _, p := range i.Addrs {
			if a := p.Addr(); a.Is4() && !a.IsLinkLocalUnicast() {
				return a
			}
		}
	}
	return netip.Addr{}
}

// nodeCertificate returns the node's certificate and key in --cert-dir,
// trading the bootstrap token for them first if there is no valid one
// (over TLS that verifies the IPAM, with no client certificate).
func nodeCertificate(ctx context.Context, cfg config, logger *slog.Logger) (string, string, error) {
	if bootstrap.Valid(cfg.CertDir, time.Now()) {
		cert, key := bootstrap.Paths(cfg.CertDir)
		return cert, key, nil
	}
	dial, err := dialOptions(cfg)
	if err != nil {
		return "", "", err
	}
	var conns []grpc.ClientConnInterface
	for _, addr := range cfg.IPAM {
		cc, err := grpc.NewClient(addr, dial...)
		if err != nil {
			return "", "", fmt.Errorf("ipam %s: %w", addr, err)
		}
		defer func() { _ = cc.Close() }()
		conns = append(conns, cc)
	}
	return bootstrap.Ensure(ctx, cfg.CertDir, cfg.BootstrapTokenFile, conns, logger)
}

// dialOptions returns the options for talking to the IPAM: TLS when a CA
// is given, keepalives that notice a dead IPAM quickly, and reconnection
// attempts at most a second apart. gRPC's default backoff (1 s, growing
// 1.6-fold to 2 minutes) would keep an announcer away from an IPAM that
// restarted in half a second for up to twice its downtime, past the grace
// period after which the node stops answering L2.
func dialOptions(cfg config) ([]grpc.DialOption, error) {
	opts := []grpc.DialOption{
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 2 * time.Second, PermitWithoutStream: true}),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	}
	if cfg.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: cfg.Token, tls: cfg.TLSCA != ""}))
	}
	if cfg.TokenFile != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tokenFile{path: cfg.TokenFile}))
	}
	if cfg.TLSCA == "" {
		return append(opts, grpc.WithTransportCredentials(insecure.NewCredentials())), nil
	}
	pem, err := os.ReadFile(cfg.TLSCA)
	if err != nil {
		return nil, fmt.Errorf("tls ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls ca %s: no certificates", cfg.TLSCA)
	}
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("tls client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tc))), nil
}

// bearer sends a token as "authorization: Bearer TOKEN" on every call.
type bearer struct {
	token string
	tls   bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// tokenFile sends the token in a file as "authorization: Bearer TOKEN",
// reading the file on every call (a session is one call), so a token the
// kubelet rotated is the one sent when the announcer reconnects.
type tokenFile struct{ path string }

func (t tokenFile) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	b, err := os.ReadFile(t.path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return nil, fmt.Errorf("token file %s is empty", t.path)
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

func (tokenFile) RequireTransportSecurity() bool { return true }

// RequireTransportSecurity is false only so a lab without TLS works; the
// gateway refuses tokens over plaintext from anywhere but loopback.
func (b bearer) RequireTransportSecurity() bool { return b.tls }
