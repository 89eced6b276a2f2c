package grpcserve_test

import (
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/beaconlb/beacon/pkg/grpcserve"
)

// TestMaxRecvMsgSize sends health checks whose service name makes the request
// just under and just over the server's receive limit over a real loopback
// connection.
func TestMaxRecvMsgSize(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := grpc.NewServer(grpcserve.ServerOptions()...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := healthpb.NewHealthClient(conn)

	tests := []struct {
		name    string
		nameLen int
		want    codes.Code
	}{
		// The health server answers NotFound for an unknown service: the
		// request got through.
		{name: "under limit", nameLen: grpcserve.MaxRecvMsgSize - 16, want: codes.NotFound},
		{name: "over limit", nameLen: grpcserve.MaxRecvMsgSize + 1, want: codes.ResourceExhausted},
		{name: "registered service", nameLen: 0, want: codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.Check(t.Context(), &healthpb.HealthCheckRequest{Service: strings.Repeat("x", tt.nameLen)})
			if diff := cmp.Diff(tt.want, status.Code(err)); diff != "" {
				t.Errorf("Check code (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}
