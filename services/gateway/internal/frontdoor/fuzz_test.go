package frontdoor_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/beaconlb/beacon/pkg/devcerts"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/gateway/internal/frontdoor"
	"github.com/beaconlb/beacon/services/gateway/internal/proxy"
)

// stubAllocations answers Allocate with the owner it was given, so that
// fuzzing exercises the gateway and not the IPAM.
type stubAllocations struct {
	ipamv1.UnimplementedAllocationServiceServer
}

func (stubAllocations) Allocate(_ context.Context, req *ipamv1.AllocateRequest) (*ipamv1.AllocateResponse, error) {
	return &ipamv1.AllocateResponse{Allocation: &ipamv1.Allocation{
		Name: req.GetParent() + "/allocations/a0123456789abcdef0123", Owner: req.GetAllocation().GetOwner(),
	}, Created: true}, nil
}

// emptyAnswer answers every method the stub does not implement with an
// empty response of the method's type, after reading the request.
func emptyAnswer(_ any, stream grpc.ServerStream) error {
	full, ok := grpc.MethodFromServerStream(stream)
	if !ok {
		return status.Error(codes.Internal, "no method")
	}
	svc, method, _ := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return status.Errorf(codes.Unimplemented, "%s: %v", full, err)
	}
	md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return status.Errorf(codes.Unimplemented, "%s", full)
	}
	in := dynamicpb.NewMessage(md.Input())
	if err := stream.RecvMsg(in); err != nil {
		return err
	}
	return stream.SendMsg(dynamicpb.NewMessage(md.Output()))
}

func (stubAllocations) Release(context.Context, *ipamv1.ReleaseRequest) (*ipamv1.ReleaseResponse, error) {
	return &ipamv1.ReleaseResponse{}, nil
}

func (stubAllocations) RenewAllocation(context.Context, *ipamv1.RenewAllocationRequest) (*ipamv1.RenewAllocationResponse, error) {
	return &ipamv1.RenewAllocationResponse{}, nil
}

func (stubAllocations) UpdateAllocation(context.Context, *ipamv1.UpdateAllocationRequest) (*ipamv1.UpdateAllocationResponse, error) {
	return &ipamv1.UpdateAllocationResponse{}, nil
}

var (
	fuzzOnce    sync.Once
	fuzzHandler http.Handler
	fuzzErr     error
)

// fuzzGateway is a real gateway handler in front of a stub IPAM on
// loopback, built once per test binary.
func fuzzGateway(t testing.TB) http.Handler {
	t.Helper()
	fuzzOnce.Do(func() {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fuzzErr = err
			return
		}
		srv := grpc.NewServer(grpc.UnknownServiceHandler(emptyAnswer))
		ipamv1.RegisterAllocationServiceServer(srv, stubAllocations{})
		healthpb.RegisterHealthServer(srv, health.NewServer())
		go func() { _ = srv.Serve(lis) }()
		backend, err := proxy.DialIPAM([]string{lis.Addr().String()}, insecure.NewCredentials())
		if err != nil {
			fuzzErr = err
			return
		}
		ca, err := devcerts.NewCA("fuzz")
		if err != nil {
			fuzzErr = err
			return
		}
		cert, err := ca.ServerTLS()
		if err != nil {
			fuzzErr = err
			return
		}
		gw, err := frontdoor.New(context.Background(), frontdoor.Config{
			Backend: backend, TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
			BootstrapSecret: "bct_fuzz-bootstrap-secret",
		})
		if err != nil {
			fuzzErr = err
			return
		}
		// Serve serves the in-process server behind the REST handler; the
		// fuzz targets call the handler directly.
		gwLis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fuzzErr = err
			return
		}
		go func() { _ = gw.Serve(context.Background(), gwLis) }()
		fuzzHandler = gw.Handler()
		// The stub, the connection and the gateway live as long as the
		// test binary.
	})
	if fuzzErr != nil {
		t.Fatal(fuzzErr)
	}
	return fuzzHandler
}

// FuzzRESTAllocateBody feeds arbitrary bodies to POST
// /v1/tenants/fuzz/allocations:allocate through the gateway's real
// handler: it must never panic or fail with a 5xx, and a body that is not
// a valid AllocateRequest in JSON (or empty) must get a 4xx.
func FuzzRESTAllocateBody(f *testing.F) {
	for _, seed := range []string{
		`{"allocation":{"owner":"ns/svc"}}`,
		`{"allocation":{"owner":"ns/svc","ttl":"60s","ipFamilies":["IP_FAMILY_IPV4"],"ports":[{"port":80}]},"requestId":"r1"}`,
		`{"allocation":{"owner":`,
		`{"allocation":{"name":"tenants/other/allocations/a0123456789abcdef0123","owner":"x"}}`,
		`{"parent":"tenants/other","allocation":{"owner":"x"}}`,
		`{"allocation":{"ttl":"forever"}}`,
		`[]`, `null`, `"x"`, `{"a":1}`, "\xff\xfe", `{"allocation":{"ownerLabels":{"k":1}}}`,
		strings.Repeat(`{"allocation":`, 200),
	} {
		f.Add([]byte(seed))
	}
	h := fuzzGateway(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "https://gateway/v1/tenants/fuzz/allocations:allocate", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer bct_fuzz-bootstrap-secret")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code := rec.Code
		if code >= 500 {
			t.Fatalf("body %q: status %d %s", body, code, rec.Body.String())
		}
		// No body at all is an empty request, as grpc-gateway reads it.
		valid := len(bytes.TrimSpace(body)) == 0 || protojson.Unmarshal(body, &ipamv1.AllocateRequest{}) == nil
		if !valid && (code < 400 || code >= 500) {
			t.Fatalf("invalid body %q: status %d %s, want 4xx", body, code, rec.Body.String())
		}
	})
}
