package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
	"github.com/beaconlb/beacon/k8s-adapter/internal/request"
	"github.com/beaconlb/beacon/k8s-adapter/internal/webhook"
	"github.com/beaconlb/beacon/pkg/probe"
	"github.com/beaconlb/beacon/pkg/telemetry"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// version is set at build time (make build, make images):
//
//	go build -ldflags "-X main.version=v1.2.3"
var version = "dev"

// run wires the adapter together and runs it until ctx is done or it loses
// leadership (then it exits, and its Deployment starts it again as a
// standby).
func run(ctx context.Context, cfg config, logger *slog.Logger) error {
	tel, err := telemetry.New(ctx, telemetry.Config{ServiceName: "beacon-k8s-adapter", ServiceVersion: version, OTLPEndpoint: cfg.OTLPEndpoint})
	if err != nil {
		return err
	}
	defer func() { _ = tel.ShutdownWithin(5 * time.Second) }()

	cc, err := dialIPAM(cfg, tel.GRPCDialOptions())
	if err != nil {
		return err
	}
	defer func() { _ = cc.Close() }()
	kc, err := kube.Connect(kube.ConnectOptions{Kubeconfig: cfg.Kubeconfig, QPS: cfg.KubeQPS, Burst: cfg.KubeBurst})
	if err != nil {
		return err
	}
	ctrl, err := kube.New(kc, kube.IPAM{
		Allocations:   ipamv1.NewAllocationServiceClient(cc),
		Pools:         ipamv1.NewPoolServiceClient(cc),
		Announcements: ipamv1.NewAnnouncementServiceClient(cc),
	}, logger, kube.Config{
		Tenant:             cfg.Tenant,
		Filter:             request.Filter{Class: cfg.Class, AlsoUnclassed: cfg.AlsoUnclassed},
		Workers:            cfg.Workers,
		ResyncPeriod:       cfg.ResyncPeriod,
		ReleaseHold:        cfg.ReleaseHold,
		MetalLBReleaseHold: cfg.MetalLBHold,
		MetalLBNamespace:   cfg.MetalLBNamespace,
		SyncNodes:          cfg.SyncNodes,
		LeaderElection: kube.LeaderElection{
			Enabled: cfg.LeaderElect, Namespace: cfg.LeaseNamespace, Name: cfg.LeaseName,
			LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
		},
	})
	if err != nil {
		return err
	}
	if err := observe(tel.MeterProvider.Meter("github.com/beaconlb/beacon/k8s-adapter"), ctrl); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}

	ops := probe.New(cfg.OpsListen, tel.MetricsHandler(), logger)
	ops.AddReadiness("informers", ctrl.Ready)
	if err := ops.Listen(ctx); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ops.Run(gctx) })
	if cfg.WebhookListen != "" {
		wh := webhook.New(cfg.WebhookListen, cfg.WebhookCert, cfg.WebhookKey, ctrl, logger)
		if err := wh.Listen(); err != nil {
			return err
		}
		g.Go(func() error { return wh.Run(gctx) })
		logger.InfoContext(ctx, "webhook serving", "listen", wh.Addr().String(), "path", webhook.Path)
	}
	g.Go(func() error {
		err := ctrl.Run(gctx)
		if err == nil && ctx.Err() == nil {
			err = fmt.Errorf("controller stopped")
		}
		return err
	})
	logger.InfoContext(ctx, "k8s-adapter running", "tenant", cfg.Tenant, "class", cfg.Class, "also_unclassed", cfg.AlsoUnclassed,
		"ipam", cfg.IPAM, "metallb_namespace", cfg.MetalLBNamespace, "sync_nodes", cfg.SyncNodes, "leader_elect", cfg.LeaderElect, "ops", ops.Addr().String(), "version", version)
	err = g.Wait()
	logger.Info("k8s-adapter stopped", "clean", err == nil)
	return err
}

// dialIPAM returns one connection over every IPAM address (pick-first: the
// next address when one fails).
func dialIPAM(cfg config, extra []grpc.DialOption) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 2 * time.Second, PermitWithoutStream: true})}
	if cfg.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: cfg.Token, tls: cfg.TLSCA != ""}))
	}
	creds, err := transportCredentials(cfg)
	if err != nil {
		return nil, err
	}
	opts = append(opts, grpc.WithTransportCredentials(creds))
	opts = append(opts, extra...)
	target := cfg.IPAM[0]
	if len(cfg.IPAM) > 1 {
		r := manual.NewBuilderWithScheme("beacon-ipam")
		addrs := make([]resolver.Address, 0, len(cfg.IPAM))
		for _, a := range cfg.IPAM {
			addrs = append(addrs, resolver.Address{Addr: a})
		}
		r.InitialState(resolver.State{Addresses: addrs})
		opts = append(opts, grpc.WithResolvers(r))
		target = r.Scheme() + ":///ipam"
	}
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("ipam %v: %w", cfg.IPAM, err)
	}
	return cc, nil
}

func transportCredentials(cfg config) (credentials.TransportCredentials, error) {
	if cfg.TLSCA == "" {
		return insecure.NewCredentials(), nil
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
	return credentials.NewTLS(tc), nil
}

// bearer sends a token as "authorization: Bearer TOKEN" on every call.
type bearer struct {
	token string
	tls   bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is false only so that a lab without TLS works;
// the gateway refuses tokens over plaintext from anywhere but loopback.
func (b bearer) RequireTransportSecurity() bool { return b.tls }
