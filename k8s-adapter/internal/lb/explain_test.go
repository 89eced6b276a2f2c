package lb

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beaconlb/beacon/k8s-adapter/internal/reason"
)

func ipamErr(code codes.Code, r, msg string, meta map[string]string) error {
	st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: r, Domain: "ipam.beacon.dev", Metadata: meta})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func TestExplain(t *testing.T) {
	held := ipamErr(codes.FailedPrecondition, "ADDRESS_IN_USE", `address 198.51.100.5 is kept for the released owner "ns/old" until 2030-01-01T00:00:00Z (a release hold)`,
		map[string]string{"held_for": "ns/old", "hold_expire_time": "2030-01-01T00:00:00Z"})
	tests := []struct {
		name   string
		err    error
		reason string
		says   []string
	}{
		{"held, wrapped", wrap("allocate", held), reason.AddressHeld, []string{"address 198.51.100.5", "ns/old", "2030-01-01T00:00:00Z", "beaconctl alloc release ns/old --tenant c1"}},
		{"in use", ipamErr(codes.FailedPrecondition, "ADDRESS_IN_USE", "address 198.51.100.5 is in use", nil), reason.AddressInUse, []string{"198.51.100.5", "another Service"}},
		{"exhausted", wrap("allocate", ipamErr(codes.ResourceExhausted, "POOL_EXHAUSTED", "no free address", nil)), reason.PoolExhausted, []string{"no free address"}},
		{"pool in use", fmt.Errorf("IPAddressPool x: %w", ipamErr(codes.FailedPrecondition, "POOL_IN_USE", "pool \"x\" has 1 address(es) in use: 198.51.100.5 (allocated to ns/web)", nil)), reason.PoolInUse, []string{"198.51.100.5 (allocated to ns/web)"}},
		{"bad argument, no ErrorInfo", status.Error(codes.InvalidArgument, "pool.ranges[0]: not a range"), reason.InvalidSpec, []string{"pool.ranges[0]: not a range"}},
		{"no such global group", ipamErr(codes.NotFound, "NOT_FOUND", "global group pools/a/globalGroups/web not found", nil), reason.GlobalGroupNotFound, []string{"pools/a/globalGroups/web", "beaconctl group create POOL/GROUP --tenant c1"}},
		{"global group not granted", ipamErr(codes.FailedPrecondition, "NOT_ALLOWED", `tenant "c1" is not granted to join global group pools/a/globalGroups/web`, nil), reason.NotAllowed, []string{"not granted"}},
		{"pool not found", ipamErr(codes.NotFound, "NOT_FOUND", `pool "x" not found`, nil), reason.PoolNotFound, []string{`pool "x"`}},
		{"unavailable", status.Error(codes.Unavailable, "connection refused"), reason.IPAMUnavailable, []string{"retrying"}},
		{"context", context.DeadlineExceeded, reason.IPAMUnavailable, []string{"retrying"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, msg := Explain(tt.err, "c1")
			if r != tt.reason {
				t.Errorf("reason %q, want %q", r, tt.reason)
			}
			if _, ok := reason.Meaning()[r]; !ok {
				t.Errorf("reason %q is not in the table", r)
			}
			for _, s := range tt.says {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q does not say %q", msg, s)
				}
			}
			for _, bad := range []string{"rpc error", "code =", "desc =", "ADDRESS_", "POOL_"} {
				if strings.Contains(msg, bad) {
					t.Errorf("message %q carries transport text %q", msg, bad)
				}
			}
		})
	}
}
