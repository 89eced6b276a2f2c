package telemetry_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/beaconlb/beacon/pkg/telemetry"
	"github.com/beaconlb/beacon/pkg/testwait"
)

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     telemetry.Config
		wantErr bool
	}{
		{name: "minimal", cfg: telemetry.Config{ServiceName: "ipamd"}},
		{name: "ratio half", cfg: telemetry.Config{ServiceName: "ipamd", ServiceVersion: "v1", TraceSampleRatio: 0.5}},
		{name: "ratio one", cfg: telemetry.Config{ServiceName: "ipamd", TraceSampleRatio: 1}},
		{name: "no service name", cfg: telemetry.Config{}, wantErr: true},
		{name: "negative ratio", cfg: telemetry.Config{ServiceName: "ipamd", TraceSampleRatio: -0.1}, wantErr: true},
		{name: "ratio above one", cfg: telemetry.Config{ServiceName: "ipamd", TraceSampleRatio: 1.5}, wantErr: true},
		{name: "ratio NaN", cfg: telemetry.Config{ServiceName: "ipamd", TraceSampleRatio: math.NaN()}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tel, err := telemetry.New(t.Context(), tt.cfg)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("New(%+v) succeeded, want error", tt.cfg)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%+v): %v", tt.cfg, err)
			}
			if err := tel.Shutdown(t.Context()); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
}

// TestGRPCInstrumentation makes a real gRPC call over loopback between a
// client and a server both instrumented by one Telemetry, and checks that the
// trace crosses the wire and that the RPC metrics are served.
func TestGRPCInstrumentation(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(t.Context(), telemetry.Config{ServiceName: "beacon-test", ServiceVersion: "v0.0.1"},
		telemetry.WithSpanExporter(spans))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})

	addr := startHealthServer(t, tel.GRPCServerOptions()...)
	conn, err := grpc.NewClient(addr, append(tel.GRPCDialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	ctx, parent := tel.TracerProvider.Tracer("test").Start(t.Context(), "parent")
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	parent.End()
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check status = %v, want SERVING", resp.GetStatus())
	}

	// The server span ends after the response is on the wire, so it may
	// trail the client's return a little.
	const method = "grpc.health.v1.Health/Check"
	var client, server tracetest.SpanStub
	waitFor(t, "client and server spans", func() bool {
		client, server = tracetest.SpanStub{}, tracetest.SpanStub{}
		for _, s := range spans.GetSpans() {
			switch {
			case s.Name == method && s.SpanKind == trace.SpanKindClient:
				client = s
			case s.Name == method && s.SpanKind == trace.SpanKindServer:
				server = s
			}
		}
		return client.Name != "" && server.Name != ""
	})

	type link struct{ Trace, Parent string }
	want := map[string]link{
		"client": {Trace: parent.SpanContext().TraceID().String(), Parent: parent.SpanContext().SpanID().String()},
		"server": {Trace: parent.SpanContext().TraceID().String(), Parent: client.SpanContext.SpanID().String()},
	}
	got := map[string]link{
		"client": {Trace: client.SpanContext.TraceID().String(), Parent: client.Parent.SpanID().String()},
		"server": {Trace: server.SpanContext.TraceID().String(), Parent: server.Parent.SpanID().String()},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("span lineage (-want +got):\n%s", diff)
	}
	if !server.Parent.IsRemote() {
		t.Errorf("server span parent is not remote: %+v", server.Parent)
	}

	// The server records its call after it has answered, which may be after
	// the client has its answer: wait for it.
	var body string
	testwait.Until(t, 30*time.Second, "the server's call in the metrics", func() bool {
		body = scrape(t, tel.MetricsHandler())
		return strings.Contains(body, `rpc_server_call_duration_seconds_count{`)
	})
	for _, want := range []string{
		`rpc_server_call_duration_seconds_count{`,
		`rpc_client_call_duration_seconds_count{`,
		`rpc_method="grpc.health.v1.Health/Check"`,
		`target_info{`,
		`service_name="beacon-test"`,
		`go_goroutines `,
		`process_start_time_seconds `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q; got:\n%s", want, body)
		}
	}
}

// TestOTLPExport checks that with an OTLPEndpoint, spans reach a collector
// over OTLP/gRPC no later than Shutdown.
func TestOTLPExport(t *testing.T) {
	col := &fakeCollector{}
	addr := startGRPCServer(t, nil, func(s *grpc.Server) {
		coltracepb.RegisterTraceServiceServer(s, col)
	})
	tel, err := telemetry.New(t.Context(), telemetry.Config{
		ServiceName:  "beacon-otlp-test",
		OTLPEndpoint: addr,
		OTLPInsecure: true,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, span := tel.TracerProvider.Tracer("test").Start(t.Context(), "exported")
	span.End()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	type got struct{ Service, Span, TraceID string }
	want := []got{{Service: "beacon-otlp-test", Span: "exported", TraceID: span.SpanContext().TraceID().String()}}
	var gotSpans []got
	for _, req := range col.requests() {
		for _, rs := range req.GetResourceSpans() {
			var service string
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					gotSpans = append(gotSpans, got{Service: service, Span: s.GetName(), TraceID: trace.TraceID(s.GetTraceId()).String()})
				}
			}
		}
	}
	if diff := cmp.Diff(want, gotSpans); diff != "" {
		t.Errorf("exported spans (-want +got):\n%s", diff)
	}
}

func TestShutdownHonoursContext(t *testing.T) {
	// A collector address that refuses connections: Shutdown must still
	// return once its context is done.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	tel, err := telemetry.New(t.Context(), telemetry.Config{ServiceName: "beacon-test", OTLPEndpoint: addr, OTLPInsecure: true})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, span := tel.TracerProvider.Tracer("test").Start(t.Context(), "lost")
	span.End()

	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = tel.Shutdown(ctx)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Shutdown took %v with a 500ms context", took)
	}
	if err == nil {
		t.Errorf("Shutdown succeeded although the collector is unreachable")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Logf("Shutdown error (not DeadlineExceeded): %v", err)
	}
}

type fakeCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu   sync.Mutex
	reqs []*coltracepb.ExportTraceServiceRequest
}

func (c *fakeCollector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (c *fakeCollector) requests() []*coltracepb.ExportTraceServiceRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*coltracepb.ExportTraceServiceRequest(nil), c.reqs...)
}

func startHealthServer(t *testing.T, opts ...grpc.ServerOption) string {
	t.Helper()
	return startGRPCServer(t, opts, func(s *grpc.Server) {
		healthpb.RegisterHealthServer(s, health.NewServer())
	})
}

// startGRPCServer serves a gRPC server on 127.0.0.1:0 until the test ends and
// returns its address.
func startGRPCServer(t *testing.T, opts []grpc.ServerOption, register func(*grpc.Server)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := grpc.NewServer(opts...)
	register(s)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-done; err != nil {
			t.Errorf("grpc Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// scrape serves h on 127.0.0.1:0 and GETs it once.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("http Serve: %v", err)
		}
	}()

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+ln.Addr().String()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read /metrics: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d:\n%s", resp.StatusCode, body)
	}
	return string(body)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 30*time.Second, what, cond)
}
