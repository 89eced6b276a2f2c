package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/beaconlb/beacon/services/gateway/internal/console"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/beaconlb/beacon/pkg/devcerts"
	"github.com/beaconlb/beacon/pkg/probe"
	"github.com/beaconlb/beacon/pkg/telemetry"
	"github.com/beaconlb/beacon/services/gateway/internal/frontdoor"
	"github.com/beaconlb/beacon/services/gateway/internal/proxy"
)

// version is set at build time (make build, make images):
//
//	go build -ldflags "-X main.version=v1.2.3"
var version = "dev"

// run wires gatewayd together and serves until ctx is done.
func run(ctx context.Context, cfg config, logger *slog.Logger) error {
	tel, err := telemetry.New(ctx, telemetry.Config{
		ServiceName: "beacon-gatewayd", ServiceVersion: version,
		OTLPEndpoint: cfg.OTLPEndpoint, OTLPInsecure: cfg.OTLPInsecure,
	})
	if err != nil {
		return err
	}
	defer func() { _ = tel.ShutdownWithin(5 * time.Second) }()

	if cfg.DevCerts != "" {
		p, err := devcerts.Ensure(cfg.DevCerts, devcerts.DefaultIdentities()...)
		if err != nil {
			return err
		}
		cfg.TLSCert, cfg.TLSKey = p.ServerCert, p.ServerKey
		if cfg.ClientCA == "" {
			cfg.ClientCA = p.CA
		}
		logger.InfoContext(ctx, "development certificates", "dir", p.Dir, "ca", p.CA, "identities", devcerts.DefaultIdentities())
	}
	serverTLS, err := serverTLSConfig(cfg)
	if err != nil {
		return err
	}
	secret, created, err := bootstrapSecret(cfg.BootstrapTokenFile)
	if err != nil {
		return err
	}
	if created {
		logger.InfoContext(ctx, "bootstrap admin token written", "file", cfg.BootstrapTokenFile)
	}
	ipamCreds, err := ipamCredentials(cfg)
	if err != nil {
		return err
	}
	backend, err := proxy.DialIPAM(cfg.IPAM, ipamCreds, tel.GRPCDialOptions()...)
	if err != nil {
		return err
	}
	defer func() { _ = backend.Close() }()

	gw, err := frontdoor.New(ctx, frontdoor.Config{
		Backend:           backend,
		TLS:               serverTLS,
		BootstrapSecret:   secret,
		TokenTTL:          cfg.TokenCacheTTL,
		TokenNegativeTTL:  cfg.TokenNegativeTTL,
		RateLimit:         cfg.RateLimit,
		RateBurst:         cfg.RateBurst,
		AuthFailureRate:   cfg.AuthFailureRate,
		AuthFailureBurst:  cfg.AuthFailureBurst,
		RefusalHold:       refusalHold(cfg.RateLimitHold),
		MaxUnaryTimeout:   cfg.MaxUnaryTimeout,
		MaxRESTBody:       cfg.MaxRESTBody,
		MaxStreamsPerConn: cfg.MaxStreamsPerConn,
		ShutdownGrace:     cfg.ShutdownGrace,
		Console:           console.Handler(),
		Telemetry:         tel,
		Logger:            logger,
	})
	if err != nil {
		return err
	}
	defer gw.Close()

	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	ops := probe.New(cfg.OpsListen, tel.MetricsHandler(), logger)
	ops.AddReadiness("ipam", gw.Ready)
	if err := ops.Listen(ctx); err != nil {
		_ = lis.Close()
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ops.Run(gctx) })
	g.Go(func() error { return gw.Serve(gctx, lis) })
	logger.InfoContext(ctx, "gatewayd serving", "listen", lis.Addr().String(), "ops", ops.Addr().String(),
		"ipam", cfg.IPAM, "client_certificates", cfg.ClientCA != "", "version", version)
	err = g.Wait()
	logger.Info("gatewayd stopped", "clean", err == nil)
	return err
}

// refusalHold maps --rate-limit-hold to frontdoor.Config.RefusalHold, where
// 0 means the default and negative means none.
func refusalHold(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// serverTLSConfig loads the server certificate and, if set, the client CA.
func serverTLSConfig(cfg config) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.ClientCA != "" {
		pool, err := loadPool(cfg.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("client ca: %w", err)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return tc, nil
}

// ipamCredentials is plaintext unless --ipam-tls-ca is set.
func ipamCredentials(cfg config) (credentials.TransportCredentials, error) {
	if cfg.IPAMTLSCA == "" {
		return insecure.NewCredentials(), nil
	}
	pool, err := loadPool(cfg.IPAMTLSCA)
	if err != nil {
		return nil, fmt.Errorf("ipam tls ca: %w", err)
	}
	name := cfg.IPAMTLSServerName
	if name == "" {
		name, _, _ = net.SplitHostPort(cfg.IPAM[0])
	}
	tc := &tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12}
	if cfg.IPAMTLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.IPAMTLSCert, cfg.IPAMTLSKey)
		if err != nil {
			return nil, fmt.Errorf("ipam tls: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(tc), nil
}

func loadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no certificates", path)
	}
	return pool, nil
}

// minBootstrapSecret is the shortest bootstrap secret accepted.
const minBootstrapSecret = 16

// bootstrapSecret reads the bootstrap admin secret from path, or, if the
// file does not exist, makes a fresh one ("bct_" and 43 random characters)
// and writes it there with mode 0600. An empty path means none.
func bootstrapSecret(path string) (secret string, created bool, err error) {
	if path == "" {
		return "", false, nil
	}
	b, err := os.ReadFile(path)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if len(s) < minBootstrapSecret {
			return "", false, fmt.Errorf("bootstrap token file %s: the secret must be at least %d characters", path, minBootstrapSecret)
		}
		return s, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("bootstrap token file: %w", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", false, err
	}
	s := "bct_" + base64.RawURLEncoding.EncodeToString(raw[:])
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("bootstrap token file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("bootstrap token file: %w", err)
	}
	if _, err := f.WriteString(s + "\n"); err != nil {
		_ = f.Close()
		return "", false, fmt.Errorf("bootstrap token file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", false, fmt.Errorf("bootstrap token file: %w", err)
	}
	return s, true, nil
}
