package fault_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/proto/tenantscope"
	"github.com/beaconlb/beacon/services/gateway/internal/fault"
)

// internal is text that must never reach a client: addresses, etcd keys,
// library error text.
var internal = []string{"10.9.8.7", "/beacon/v1/", "proto:", "transport:", "dial tcp", "x509:", "allocations.field"}

func TestStatus(t *testing.T) {
	ipamRefusal := func() error {
		st := status.New(codes.FailedPrecondition, "pool p is exhausted")
		st, _ = st.WithDetails(&errdetails.ErrorInfo{Reason: "POOL_EXHAUSTED", Domain: "ipam.beacon.dev"})
		return st.Err()
	}
	ipamStorage := func() error {
		st := status.New(codes.Unavailable, "storage unavailable; retry")
		st, _ = st.WithDetails(&errdetails.ErrorInfo{Reason: "STORAGE_UNAVAILABLE", Domain: "ipam.beacon.dev"})
		return st.Err()
	}
	tests := []struct {
		name     string
		err      error
		code     codes.Code
		msg      string
		canceled bool // the caller's context is done
	}{
		{"no error", nil, codes.OK, "", false},
		{"no credentials", fault.ErrNoCredentials, codes.Unauthenticated, fault.ErrNoCredentials.Error(), false},
		{"malformed authorization", fault.ErrMalformedAuthorization, codes.Unauthenticated, `authorization must be one "Bearer SECRET"`, false},
		{"invalid token", fault.ErrInvalidToken, codes.Unauthenticated, "invalid, revoked or expired token", false},
		{"token not verifiable: the IPAM's text stays behind",
			fmt.Errorf("%w: %w", fault.ErrTokenUnverifiable, status.Error(codes.Unavailable, "connection error: desc = transport: dial tcp 10.9.8.7:7400")),
			codes.Unavailable, "cannot verify the token now; retry", false},
		{"shutting down", fault.ErrShuttingDown, codes.Unavailable, "the gateway is shutting down; reconnect", false},
		{"unusable certificate", &fault.CertificateError{Reason: "client certificate has no beacon:// URI SAN"}, codes.Unauthenticated, "client certificate has no beacon:// URI SAN", false},
		{"unknown method", &fault.UnknownMethodError{Method: "/x.Y/Z"}, codes.Unimplemented, "unknown method /x.Y/Z", false},
		{"role denied", &fault.DeniedError{Role: "tenant", Method: "/beacon.ipam.v1.TenantService/CreateTenant"}, codes.PermissionDenied, "role tenant may not call /beacon.ipam.v1.TenantService/CreateTenant", false},
		{"scope", &fault.ScopeError{Reason: "the stream must open with a message naming tenants/c1"}, codes.PermissionDenied, "the stream must open with a message naming tenants/c1", false},
		{"tenant scope refusal", tenantscope.CheckRequest((&ipamv1.GetTenantRequest{Name: "tenants/c2"}).ProtoReflect(), "c1", true),
			codes.PermissionDenied, `name: "tenants/c2" is not a resource of tenants/c1`, false},
		{"unknown fields", tenantscope.ErrUnknownFields, codes.InvalidArgument, tenantscope.ErrUnknownFields.Error(), false},
		{"undecodable request: the decoder's text stays behind",
			&fault.UndecodableError{Method: "/beacon.ipam.v1.PoolService/GetPool", Cause: errors.New("proto: cannot parse invalid wire-format data")},
			codes.InvalidArgument, "cannot decode the /beacon.ipam.v1.PoolService/GetPool request", false},
		{"body", &fault.BodyError{Reason: "request body is not valid JSON"}, codes.InvalidArgument, "request body is not valid JSON", false},
		{"rate limit", &fault.LimitError{Message: "rate limit for tenant exceeded", Wait: time.Second, Reason: "RATE_LIMITED"}, codes.ResourceExhausted, "rate limit for tenant exceeded", false},
		{"leak: withheld without a word", &tenantscope.LeakError{Path: "allocations.field"}, codes.Internal, "internal error", false},
		{"the IPAM's refusal as it is", ipamRefusal(), codes.FailedPrecondition, "pool p is exhausted", false},
		{"the IPAM's storage unavailable as it is", ipamStorage(), codes.Unavailable, "storage unavailable; retry", false},
		{"transport failure on the way to the IPAM", status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial tcp 10.9.8.7:7400: connect: connection refused\""),
			codes.Unavailable, "the IPAM is unavailable; retry", false},
		{"unknown from the IPAM", status.Error(codes.Unknown, "etcd key /beacon/v1/x: boom"), codes.Internal, "internal error", false},
		{"internal from the IPAM", status.Error(codes.Internal, "grpc: error unmarshalling response: proto: bad"), codes.Internal, "internal error", false},
		{"deadline on the way", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), codes.DeadlineExceeded, "deadline exceeded", false},
		{"the gateway's own failure", fmt.Errorf("re-encode the response: %w", errors.New("proto: 10.9.8.7")), codes.Internal, "internal error", false},
		{"the caller went away", context.Canceled, codes.Canceled, "context canceled", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.canceled {
				cancel()
			}
			got := status.Convert(fault.Status(ctx, slog.New(slog.DiscardHandler), "/m", tt.err))
			if diff := cmp.Diff(struct {
				Code codes.Code
				Msg  string
			}{tt.code, tt.msg}, struct {
				Code codes.Code
				Msg  string
			}{got.Code(), got.Message()}); diff != "" {
				t.Errorf("Status (-want +got):\n%s", diff)
			}
			for _, s := range internal {
				if strings.Contains(got.Message(), s) {
					t.Errorf("message %q holds internal text %q", got.Message(), s)
				}
			}
		})
	}
}

func TestStatusRateLimitDetails(t *testing.T) {
	err := fault.Status(context.Background(), slog.New(slog.DiscardHandler), "/m",
		&fault.LimitError{Message: "slow down", Wait: 1500 * time.Millisecond, Reason: "RATE_LIMITED", Meta: map[string]string{"tenant": "c1"}})
	var retry time.Duration
	var info *errdetails.ErrorInfo
	for _, d := range status.Convert(err).Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			retry = d.GetRetryDelay().AsDuration()
		case *errdetails.ErrorInfo:
			info = d
		}
	}
	if retry != 1500*time.Millisecond {
		t.Errorf("RetryInfo delay = %v, want 1.5s", retry)
	}
	if info.GetReason() != "RATE_LIMITED" || info.GetDomain() != "gateway.beacon" || info.GetMetadata()["tenant"] != "c1" {
		t.Errorf("ErrorInfo = %v", info)
	}
}
