// Package testenv sets up the gateway the gateway's tests run against, in
// front of real IPAM replicas (started with pkg/ipamtest): a gateway serving
// TLS on a loopback port, a throwaway CA, and gRPC and HTTPS clients that
// present a client certificate or a bearer token. Only tests import it.
package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/beaconlb/beacon/pkg/devcerts"
	"github.com/beaconlb/beacon/pkg/telemetry"
	"github.com/beaconlb/beacon/pkg/testwait"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/gateway/internal/frontdoor"
	"github.com/beaconlb/beacon/services/gateway/internal/proxy"
)

// Options change the gateway a test gets.
type Options struct {
	// IPAM are the replicas' addresses.
	IPAM []string
	// Config changes the gateway's configuration before it starts.
	Config func(*frontdoor.Config)
	// Telemetry instruments the gateway; nil: none.
	Telemetry *telemetry.Telemetry
}

// Env is a running gateway and what it takes to call it.
type Env struct {
	// CA signs the server and client certificates.
	CA *devcerts.CA
	// Bootstrap is the admin bearer secret the gateway accepts.
	Bootstrap string
	// Addr is the gateway's TLS address (127.0.0.1:port).
	Addr string
	// Backend is the gateway's connection to the IPAM.
	Backend *grpc.ClientConn
	// Gateway is the gateway itself.
	Gateway *frontdoor.Gateway
}

// Start runs a gateway in front of o.IPAM on a free loopback port; it
// stops when the test ends.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	ca, err := devcerts.NewCA("gateway test CA")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	var dialOpts []grpc.DialOption
	if o.Telemetry != nil {
		dialOpts = o.Telemetry.GRPCDialOptions()
	}
	backend, err := proxy.DialIPAM(o.IPAM, insecure.NewCredentials(), dialOpts...)
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{CA: ca, Bootstrap: "bct_bootstrap-secret-for-tests", Backend: backend}
	cfg := frontdoor.Config{
		Backend:         backend,
		TLS:             &tls.Config{Certificates: []tls.Certificate{srv}, ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS12},
		BootstrapSecret: e.Bootstrap,
		ShutdownGrace:   2 * time.Second,
		Telemetry:       o.Telemetry,
		Logger:          slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	if o.Config != nil {
		o.Config(&cfg)
	}
	gw, err := frontdoor.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.Gateway = gw
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.Addr = lis.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("gateway Serve: %v", err)
		}
		gw.Close()
		_ = backend.Close()
	})
	return e
}

// testWriter sends the gateway's log lines to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Cred is how a client authenticates: a certificate identity, a bearer
// secret, both, or nothing.
type Cred struct {
	Identity string // beacon://... for a client certificate
	Token    string // bearer secret
}

// Cert is a client certificate credential.
func Cert(identity string) Cred { return Cred{Identity: identity} }

// Token is a bearer token credential.
func Token(secret string) Cred { return Cred{Token: secret} }

// Admin is the bootstrap admin token.
func (e *Env) Admin() Cred { return Token(e.Bootstrap) }

// ClientTLS returns a client TLS config trusting the gateway, presenting
// c's certificate if it has one.
func (e *Env) ClientTLS(t testing.TB, c Cred) *tls.Config {
	t.Helper()
	tc := &tls.Config{RootCAs: e.CA.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if c.Identity != "" {
		cert, err := e.CA.ClientTLS(c.Identity)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc
}

// Conn returns a gRPC connection to the gateway with c's credentials; it
// is closed when the test ends.
func (e *Env) Conn(t testing.TB, c Cred, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(e.ClientTLS(t, c)))}, opts...)
	if c.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(c.Token)))
	}
	conn, err := grpc.NewClient(e.Addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// HTTP returns an HTTPS client presenting c's certificate (a token must
// be set per request: see Request).
func (e *Env) HTTP(t testing.TB, c Cred) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: e.ClientTLS(t, c), ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// URL returns the gateway's https URL of path.
func (e *Env) URL(path string) string { return "https://" + e.Addr + path }

// Request makes an HTTP request to the gateway with c's token, if any.
func (e *Env) Request(t testing.TB, c Cred, method, path, body string) *http.Request {
	t.Helper()
	var r *http.Request
	var err error
	if body == "" {
		r, err = http.NewRequestWithContext(t.Context(), method, e.URL(path), nil)
	} else {
		r, err = http.NewRequestWithContext(t.Context(), method, e.URL(path), strings.NewReader(body))
	}
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "" {
		r.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }

// IssueToken creates a token with the admin credentials and returns its
// secret.
func (e *Env) IssueToken(t testing.TB, id string, role ipamv1.Role, tenant string) string {
	t.Helper()
	tk := &ipamv1.Token{Role: role}
	if tenant != "" {
		tk.Tenant = "tenants/" + tenant
	}
	resp, err := ipamv1.NewTokenServiceClient(e.Conn(t, e.Admin())).CreateToken(t.Context(), &ipamv1.CreateTokenRequest{TokenId: id, Token: tk})
	if err != nil {
		t.Fatalf("CreateToken %s: %v", id, err)
	}
	return resp.GetSecret()
}

// WaitReady waits until the gateway reaches a healthy IPAM replica.
func (e *Env) WaitReady(t testing.TB) {
	t.Helper()
	testwait.For(t, time.Minute, "the gateway to be ready", func() error { return e.Gateway.Ready(t.Context()) })
}

// Must fails the test on err.
func Must[T any](t testing.TB, v T, err error) T {
	t.Helper()
	if err != nil {
		t.Fatal(fmt.Errorf("unexpected error: %w", err))
	}
	return v
}
