package lb

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func TestDiff(t *testing.T) {
	have := &ipamv1.Allocation{
		OwnerLabels: map[string]string{"a": "1"},
		Ports:       []*ipamv1.Port{{Port: 80, Protocol: ipamv1.Protocol_PROTOCOL_TCP}, {Port: 53, Protocol: ipamv1.Protocol_PROTOCOL_UDP}},
	}
	tests := []struct {
		name string
		want *ipamv1.Allocation
		mask []string
	}{
		{"same, other order, defaults", &ipamv1.Allocation{
			OwnerLabels:   map[string]string{"a": "1"},
			Ports:         []*ipamv1.Port{{Port: 53, Protocol: ipamv1.Protocol_PROTOCOL_UDP}, {Port: 80}},
			TrafficPolicy: ipamv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		}, nil},
		{"everything", &ipamv1.Allocation{
			OwnerLabels:     map[string]string{"a": "2"},
			NamespaceLabels: map[string]string{"ns": "x"},
			Ports:           []*ipamv1.Port{{Port: 80}},
			TrafficPolicy:   ipamv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL,
			EndpointNodes:   []string{"n1"},
		}, []string{"owner_labels", "namespace_labels", "ports", "traffic_policy", "endpoint_nodes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.mask, diff(have, tt.want)); d != "" {
				t.Fatalf("mask (-want +got):\n%s", d)
			}
		})
	}
}

func TestReasonOf(t *testing.T) {
	st, err := status.New(codes.ResourceExhausted, "pool full").WithDetails(&errdetails.ErrorInfo{Reason: "POOL_EXHAUSTED", Domain: "ipam.beacon.dev"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"error info", st.Err(), "POOL_EXHAUSTED"},
		{"wrapped", wrap("allocate", st.Err()), "POOL_EXHAUSTED"},
		{"wrapped twice", fmt.Errorf("x: %w", wrap("allocate", st.Err())), "POOL_EXHAUSTED"},
		{"code only", status.Error(codes.Unavailable, "down"), "Unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ReasonOf(tt.err); got != tt.want {
				t.Fatalf("ReasonOf = %q, want %q", got, tt.want)
			}
		})
	}
	var e *Error
	if !errors.As(wrap("allocate", status.Error(codes.Unavailable, "down")), &e) || !e.Retryable() {
		t.Fatalf("Unavailable should be a retryable *Error: %v", e)
	}
}
