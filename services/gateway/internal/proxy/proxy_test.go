package proxy_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/gateway/internal/auth"
	"github.com/beaconlb/beacon/services/gateway/internal/proxy"
)

// stub is a fake IPAM that reports what it received, for testing the
// proxy's plumbing (metadata, deadlines, cancellation) apart from the
// IPAM's behaviour.
type stub struct {
	ipamv1.UnimplementedPoolServiceServer
	ipamv1.UnimplementedAllocationServiceServer
	seen      chan metadata.MD
	deadlines chan time.Duration
	ended     chan error

	mu       sync.Mutex
	attempts map[string]int // Allocate calls per owner
}

// Allocate answers UNAVAILABLE to the first call for an owner starting
// with "flaky/", as a replica that dies under a call does, and allocates
// the second.
func (s *stub) Allocate(_ context.Context, req *ipamv1.AllocateRequest) (*ipamv1.AllocateResponse, error) {
	owner := req.GetAllocation().GetOwner()
	s.mu.Lock()
	s.attempts[owner]++
	n := s.attempts[owner]
	s.mu.Unlock()
	if strings.HasPrefix(owner, "flaky/") && n == 1 {
		return nil, status.Error(codes.Unavailable, "transport is closing")
	}
	return &ipamv1.AllocateResponse{Allocation: &ipamv1.Allocation{Owner: owner}, Created: true}, nil
}

func (s *stub) tries(owner string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts[owner]
}

func (s *stub) GetPool(ctx context.Context, req *ipamv1.GetPoolRequest) (*ipamv1.GetPoolResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.seen <- md
	if d, ok := ctx.Deadline(); ok {
		s.deadlines <- time.Until(d)
	} else {
		s.deadlines <- 0
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-backend", "header"))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-backend-trailer", "trailer"))
	if req.GetName() == "pools/slow" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &ipamv1.GetPoolResponse{Pool: &ipamv1.Pool{Name: req.GetName()}}, nil
}

func (s *stub) WatchAllocations(_ *ipamv1.WatchAllocationsRequest, ws ipamv1.AllocationService_WatchAllocationsServer) error {
	for {
		if err := ws.Send(&ipamv1.WatchAllocationsResponse{ResumeToken: "r1"}); err != nil {
			s.ended <- err
			return err
		}
		select {
		case <-ws.Context().Done():
			s.ended <- ws.Context().Err()
			return ws.Context().Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

const secret = "bct_proxy-test-secret"

// start runs the stub and a proxy in front of it, both on loopback, and
// returns the proxy, a connection to it, and the stub.
func start(t *testing.T, cfg proxy.Config) (*proxy.Proxy, *grpc.ClientConn, *stub) {
	t.Helper()
	s := &stub{seen: make(chan metadata.MD, 10), deadlines: make(chan time.Duration, 10), ended: make(chan error, 10), attempts: map[string]int{}}
	bl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bs := grpc.NewServer()
	ipamv1.RegisterPoolServiceServer(bs, s)
	ipamv1.RegisterAllocationServiceServer(bs, s)
	healthpb.RegisterHealthServer(bs, health.NewServer())
	go func() { _ = bs.Serve(bl) }()
	t.Cleanup(bs.Stop)
	backend, err := proxy.DialIPAM([]string{bl.Addr().String()}, insecure.NewCredentials())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = backend.Close() })
	cfg.Backend, cfg.Auth = backend, auth.NewAuthenticator(nil, secret)
	p, err := proxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ps := grpc.NewServer(grpc.ForceServerCodecV2(proxy.Codec()), grpc.UnknownServiceHandler(p.Handler(false)))
	go func() { _ = ps.Serve(pl) }()
	t.Cleanup(ps.Stop)
	conn, err := grpc.NewClient(pl.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return p, conn, s
}

func authed(ctx context.Context, kv ...string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, append([]string{"authorization", "Bearer " + secret}, kv...)...)
}

func TestMetadata(t *testing.T) {
	_, conn, s := start(t, proxy.Config{})
	ctx := authed(t.Context(), "beacon-actor", "someone-else", "x-request-id", "req-1", "beacon-gateway-client-cert", "beacon://admin")
	var header, trailer metadata.MD
	resp, err := ipamv1.NewPoolServiceClient(conn).GetPool(ctx, &ipamv1.GetPoolRequest{Name: "pools/p"}, grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil || resp.GetPool().GetName() != "pools/p" {
		t.Fatalf("GetPool = %v, %v", resp, err)
	}
	md := <-s.seen
	got := map[string][]string{}
	for _, k := range []string{"beacon-actor", "x-request-id", "authorization", "beacon-gateway-client-cert"} {
		got[k] = md.Get(k)
	}
	want := map[string][]string{
		"beacon-actor": {auth.BootstrapActor}, "x-request-id": {"req-1"},
		"authorization": nil, "beacon-gateway-client-cert": nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metadata the IPAM saw (-want +got):\n%s", diff)
	}
	if header.Get("x-backend")[0] != "header" || trailer.Get("x-backend-trailer")[0] != "trailer" {
		t.Errorf("header %v, trailer %v: the IPAM's metadata did not come back", header, trailer)
	}
}

// A unary call that meets an unavailable replica is sent once more when
// that is safe: a write with a request_id (the IPAM answers a repeat with
// the first result) or a read; a write without one is not repeated.
func TestUnaryRetryOnUnavailable(t *testing.T) {
	_, conn, s := start(t, proxy.Config{})
	allocs := ipamv1.NewAllocationServiceClient(conn)
	tests := []struct {
		owner, requestID string
		want             codes.Code
		tries            int
	}{
		{"flaky/with-id", "req-1", codes.OK, 2},
		{"flaky/without-id", "", codes.Unavailable, 1},
		{"steady/with-id", "req-2", codes.OK, 1},
	}
	for _, tt := range tests {
		_, err := allocs.Allocate(authed(t.Context()), &ipamv1.AllocateRequest{
			Parent: "tenants/t", RequestId: tt.requestID, Allocation: &ipamv1.Allocation{Owner: tt.owner},
		})
		if got := status.Code(err); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.owner, err, tt.want)
		}
		if got := s.tries(tt.owner); got != tt.tries {
			t.Errorf("%s: the IPAM saw %d calls, want %d", tt.owner, got, tt.tries)
		}
	}
}

func TestUnaryDeadlineCap(t *testing.T) {
	_, conn, s := start(t, proxy.Config{MaxUnaryTimeout: 200 * time.Millisecond})
	pools := ipamv1.NewPoolServiceClient(conn)
	start := time.Now()
	_, err := pools.GetPool(authed(t.Context()), &ipamv1.GetPoolRequest{Name: "pools/slow"})
	if status.Code(err) != codes.DeadlineExceeded || time.Since(start) > 2*time.Second {
		t.Errorf("slow call without a deadline: %v after %v, want DeadlineExceeded after about 200ms", err, time.Since(start))
	}
	<-s.seen
	if d := <-s.deadlines; d <= 0 || d > 200*time.Millisecond {
		t.Errorf("deadline the IPAM saw: %v, want at most 200ms", d)
	}
	// A caller's shorter deadline stands.
	ctx, cancel := context.WithTimeout(authed(t.Context()), 50*time.Millisecond)
	defer cancel()
	_, _ = pools.GetPool(ctx, &ipamv1.GetPoolRequest{Name: "pools/fast"})
	<-s.seen
	if d := <-s.deadlines; d <= 0 || d > 50*time.Millisecond {
		t.Errorf("deadline the IPAM saw: %v, want at most the caller's 50ms", d)
	}
}

func TestStreamCancellationAndDrain(t *testing.T) {
	p, conn, s := start(t, proxy.Config{MaxUnaryTimeout: 50 * time.Millisecond})
	alloc := ipamv1.NewAllocationServiceClient(conn)

	// The caller cancels: the IPAM's stream ends too.
	ctx, cancel := context.WithCancel(authed(t.Context()))
	ws, err := alloc.WatchAllocations(ctx, &ipamv1.WatchAllocationsRequest{Parent: "tenants/x"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // longer than the unary cap: streams have none
		if _, err := ws.Recv(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-s.ended:
		t.Logf("the IPAM's stream ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the IPAM's stream outlived the caller's")
	}

	// Drain ends streams with Unavailable.
	ws, err = alloc.WatchAllocations(authed(t.Context()), &ipamv1.WatchAllocationsRequest{Parent: "tenants/x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Recv(); err != nil {
		t.Fatal(err)
	}
	p.Drain()
	for err == nil {
		_, err = ws.Recv()
	}
	if status.Code(err) != codes.Unavailable {
		t.Errorf("stream after Drain: %v, want Unavailable", err)
	}
	if _, err := ipamv1.NewPoolServiceClient(conn).GetPool(authed(t.Context()), &ipamv1.GetPoolRequest{Name: "pools/p"}); err != nil {
		t.Errorf("unary call after Drain: %v", err)
	}
}
