// Package frontdoor is the gateway's one TLS listener: it serves gRPC
// (HTTP/2 with content-type application/grpc), REST under /v1/, the OpenAPI
// document at /openapi.json, and the web console at / for every other
// path. gRPC and REST share one code path (package proxy): REST calls are
// made by the grpc-gateway mux against an in-process gRPC server running
// the same proxy handler.
package frontdoor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	"github.com/beaconlb/beacon/pkg/grpcserve"
	"github.com/beaconlb/beacon/pkg/telemetry"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/gateway/internal/auth"
	"github.com/beaconlb/beacon/services/gateway/internal/limit"
	"github.com/beaconlb/beacon/services/gateway/internal/policy"
	"github.com/beaconlb/beacon/services/gateway/internal/proxy"
	"github.com/beaconlb/beacon/services/gateway/internal/rest"
)

// Defaults of Config.
const (
	DefaultMaxUnaryTimeout   = 30 * time.Second
	DefaultMaxStreamsPerConn = 100
	DefaultShutdownGrace     = 10 * time.Second
	DefaultRefusalHold       = 250 * time.Millisecond
)

// Config is what a Gateway needs.
type Config struct {
	// Backend is the connection to the IPAM replicas (proxy.DialIPAM).
	// The gateway uses it and never closes it.
	Backend *grpc.ClientConn
	// TLS has the server certificate and, to accept client certificates,
	// ClientCAs. Required: the gateway serves TLS only.
	TLS *tls.Config
	// BootstrapSecret, if set, is accepted as an admin bearer token.
	BootstrapSecret string
	// TokenTTL and TokenNegativeTTL: see auth.TokenCacheConfig.
	TokenTTL, TokenNegativeTTL time.Duration
	// Rate limit per tenant and role: see limit.Config.
	RateLimit float64
	RateBurst int
	// Failed authentications per client network (IPv4 /32, IPv6 /64):
	// see limit.Failures. 0: no limit.
	AuthFailureRate  float64
	AuthFailureBurst int
	// RefusalHold is how long a rate-limited call is held before it is
	// refused (default DefaultRefusalHold; negative: not held), so that a
	// client retrying at once cannot make the gateway refuse calls as fast
	// as its CPU allows. See proxy.Config.
	RefusalHold time.Duration
	// MaxUnaryTimeout caps unary calls' deadlines (default
	// DefaultMaxUnaryTimeout; negative: no cap).
	MaxUnaryTimeout time.Duration
	// MaxRESTBody bounds REST request bodies (default 1 MiB).
	MaxRESTBody int64
	// MaxStreamsPerConn bounds concurrent HTTP/2 streams (gRPC calls) per
	// connection (default DefaultMaxStreamsPerConn).
	MaxStreamsPerConn int
	// ShutdownGrace is how long Serve lets unary calls finish once its
	// context is done (default DefaultShutdownGrace). Streams are ended at
	// once with UNAVAILABLE so their clients reconnect elsewhere.
	ShutdownGrace time.Duration
	// Console serves every path that is not the API: the web console. Nil:
	// a placeholder page.
	Console http.Handler
	// Telemetry instruments the gRPC servers and the proxy; nil: none.
	Telemetry *telemetry.Telemetry
	// Logger; nil discards.
	Logger *slog.Logger
}

// Gateway is the assembled front door. Create it with New, serve it with
// Serve, release it with Close.
type Gateway struct {
	cfg         Config
	logger      *slog.Logger
	proxy       *proxy.Proxy
	tokens      *auth.TokenCache
	public      *grpc.Server
	internal    *grpc.Server
	internalLis *bufconn.Listener
	restConn    *grpc.ClientConn
	health      *health.Server
	handler     http.Handler
	tlsConfig   *tls.Config
}

// New assembles a Gateway. It starts the in-process gRPC server behind the
// REST edge; Close stops it.
func New(ctx context.Context, cfg Config) (*Gateway, error) {
	if cfg.Backend == nil {
		return nil, errors.New("gateway: Backend is required")
	}
	if cfg.TLS == nil || (len(cfg.TLS.Certificates) == 0 && cfg.TLS.GetCertificate == nil) {
		return nil, errors.New("gateway: a TLS server certificate is required")
	}
	if cfg.MaxUnaryTimeout == 0 {
		cfg.MaxUnaryTimeout = DefaultMaxUnaryTimeout
	} else if cfg.MaxUnaryTimeout < 0 {
		cfg.MaxUnaryTimeout = 0
	}
	if cfg.MaxStreamsPerConn <= 0 {
		cfg.MaxStreamsPerConn = DefaultMaxStreamsPerConn
	}
	if cfg.RefusalHold == 0 {
		cfg.RefusalHold = DefaultRefusalHold
	} else if cfg.RefusalHold < 0 {
		cfg.RefusalHold = 0
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Console == nil {
		cfg.Console = placeholderConsole()
	}
	g := &Gateway{cfg: cfg, logger: cfg.Logger, health: health.NewServer()}

	var meter metric.Meter
	var serverOpts []grpc.ServerOption
	if cfg.Telemetry != nil {
		meter = cfg.Telemetry.MeterProvider.Meter("github.com/beaconlb/beacon/services/gateway")
		serverOpts = cfg.Telemetry.GRPCServerOptions()
	}
	observe, err := tokenCacheObserver(meter)
	if err != nil {
		return nil, err
	}
	tokens := ipamv1.NewTokenServiceClient(cfg.Backend)
	g.tokens = auth.NewTokenCache(func(ctx context.Context, secret string) (*ipamv1.Token, error) {
		ctx = metadata.AppendToOutgoingContext(ctx, proxy.ActorKey, "gateway")
		resp, err := tokens.VerifyToken(ctx, &ipamv1.VerifyTokenRequest{Secret: secret})
		return resp.GetToken(), err
	}, auth.TokenCacheConfig{TTL: cfg.TokenTTL, NegativeTTL: cfg.TokenNegativeTTL, Observe: observe})
	g.proxy, err = proxy.New(proxy.Config{
		Backend:         cfg.Backend,
		Auth:            auth.NewAuthenticator(g.tokens, cfg.BootstrapSecret),
		Policy:          policy.Table(),
		Limiter:         limit.New(limit.Config{Rate: cfg.RateLimit, Burst: cfg.RateBurst}),
		AuthFailures:    limit.NewFailures(limit.Config{Rate: cfg.AuthFailureRate, Burst: cfg.AuthFailureBurst}),
		RefusalHold:     cfg.RefusalHold,
		MaxUnaryTimeout: cfg.MaxUnaryTimeout,
		Meter:           meter,
		Logger:          cfg.Logger,
	})
	if err != nil {
		return nil, err
	}

	common := append(grpcserve.ServerOptions(), serverOpts...)
	common = append(common, grpc.ForceServerCodecV2(proxy.Codec()))
	g.public = grpc.NewServer(append(common, grpc.UnknownServiceHandler(g.proxy.Handler(false)))...)
	healthpb.RegisterHealthServer(g.public, g.health)
	// Every REST call shares the one in-process connection; the limit per
	// client connection is the TLS listener's.
	g.internal = grpc.NewServer(append(common, grpc.MaxConcurrentStreams(math.MaxUint32), grpc.UnknownServiceHandler(g.proxy.Handler(true)))...)
	g.internalLis = bufconn.Listen(1 << 20) // served by Serve

	g.restConn, err = grpc.NewClient("passthrough:///gateway-internal",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return g.internalLis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(grpcserve.MaxSendMsgSize)),
	)
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("gateway: in-process connection: %w", err)
	}
	restHandler, err := rest.NewHandler(ctx, g.restConn, rest.Options{MaxBodyBytes: cfg.MaxRESTBody, Logger: g.logger})
	if err != nil {
		g.Close()
		return nil, err
	}
	openapi, err := rest.OpenAPIHandler()
	if err != nil {
		g.Close()
		return nil, err
	}
	g.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc"):
			g.public.ServeHTTP(w, r)
		case r.URL.Path == "/openapi.json":
			openapi.ServeHTTP(w, r)
		case strings.HasPrefix(r.URL.Path, "/v1/"):
			restHandler.ServeHTTP(w, r)
		default:
			cfg.Console.ServeHTTP(w, r)
		}
	})

	g.tlsConfig = cfg.TLS.Clone()
	if g.tlsConfig.MinVersion < tls.VersionTLS12 {
		g.tlsConfig.MinVersion = tls.VersionTLS12
	}
	g.tlsConfig.NextProtos = []string{"h2", "http/1.1"}
	if g.tlsConfig.ClientCAs != nil && g.tlsConfig.ClientAuth == tls.NoClientCert {
		// Certificates are one way in, bearer tokens the other.
		g.tlsConfig.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return g, nil
}

func tokenCacheObserver(meter metric.Meter) (func(string), error) {
	if meter == nil {
		return nil, nil
	}
	c, err := meter.Int64Counter("beacon_gateway_token_lookups",
		metric.WithDescription("Bearer token lookups by result: hit (cached), miss (asked the IPAM), error (could not ask)."))
	if err != nil {
		return nil, err
	}
	return func(result string) {
		c.Add(context.Background(), 1, metric.WithAttributeSet(resultSet(result)))
	}, nil
}

func resultSet(result string) attribute.Set {
	return attribute.NewSet(attribute.String("result", result))
}

// Handler returns the gateway's HTTP handler (without TLS): gRPC, REST,
// /openapi.json and the console. Serve wraps it in the TLS server; REST
// calls through it are answered only while Serve runs (the in-process
// server behind the REST edge is Serve's).
func (g *Gateway) Handler() http.Handler { return g.handler }

// TLSConfig returns the TLS configuration Serve uses.
func (g *Gateway) TLSConfig() *tls.Config { return g.tlsConfig.Clone() }

// Ready reports whether some IPAM replica is reachable and healthy.
func (g *Gateway) Ready(context.Context) error {
	switch st := g.cfg.Backend.GetState(); st {
	case connectivity.Ready:
		return nil
	case connectivity.Idle:
		g.cfg.Backend.Connect()
		return errors.New("IPAM connection idle; connecting")
	default:
		return fmt.Errorf("no healthy IPAM replica (%s)", st)
	}
}

// Serve serves TLS on lis, and the in-process server behind the REST edge,
// until ctx is done, then shuts down: the health
// status turns NOT_SERVING, streams end with UNAVAILABLE, and unary calls
// get ShutdownGrace to finish. It returns nil after a clean shutdown.
func (g *Gateway) Serve(ctx context.Context, lis net.Listener) error {
	srv := &http.Server{
		Handler:           g.handler,
		TLSConfig:         g.tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: g.cfg.MaxStreamsPerConn,
			SendPingTimeout:      30 * time.Second,
			PingTimeout:          15 * time.Second,
		},
		// TLS handshake failures of scanners and wrong clients are routine.
		ErrorLog: slog.NewLogLogger(g.logger.Handler(), slog.LevelDebug),
	}
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); g.watchRevocations(wctx) }()
	defer func() { stopWatch(); <-watched }()
	// The in-process server behind the REST edge; Close stops it.
	go func() { _ = g.internal.Serve(g.internalLis) }()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(tls.NewListener(lis, g.tlsConfig)) }()
	g.health.Resume()
	select {
	case err := <-served:
		return fmt.Errorf("gateway: serve: %w", err)
	case <-ctx.Done():
	}
	g.health.Shutdown()
	g.proxy.Drain()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		_ = srv.Close()
		err = fmt.Errorf("gateway: calls still running after %v: %w", g.cfg.ShutdownGrace, err)
	}
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// watchRevocations makes the token cache forget each token the IPAM
// revokes, as it is revoked, until ctx is done. When the watch (re)starts,
// revocations may have been missed meanwhile: the cache is emptied then.
// Without the watch (IPAM down), cached answers last their TTL.
func (g *Gateway) watchRevocations(ctx context.Context) {
	client := ipamv1.NewTokenServiceClient(g.cfg.Backend)
	backoff := 100 * time.Millisecond
	for {
		err := g.followRevocations(ctx, client, func() { backoff = 100 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		g.logger.DebugContext(ctx, "token revocation watch ended; watching again", "error", err, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// followRevocations follows one revocation watch until it ends; started is
// called once it is established.
func (g *Gateway) followRevocations(ctx context.Context, client ipamv1.TokenServiceClient, started func()) error {
	ctx = metadata.AppendToOutgoingContext(ctx, proxy.ActorKey, "gateway")
	stream, err := client.WatchTokenRevocations(ctx, &ipamv1.WatchTokenRevocationsRequest{})
	if err != nil {
		return err
	}
	first := true
	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		if first {
			first = false
			g.tokens.ForgetAll()
			started()
		}
		for _, h := range msg.GetSecretSha256() {
			g.tokens.Forget(h)
		}
	}
}

// Close stops the in-process gRPC server and its connection.
func (g *Gateway) Close() {
	if g.restConn != nil {
		_ = g.restConn.Close()
	}
	if g.internal != nil {
		g.internal.Stop()
	}
	if g.public != nil {
		g.public.Stop()
	}
}

// placeholderConsole answers non-API paths until the web console is
// mounted (Config.Console).
func placeholderConsole() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("Beacon gateway. gRPC and REST (/v1/...) API; OpenAPI document at /openapi.json.\n"))
	})
}
