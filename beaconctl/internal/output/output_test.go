package output

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 800, time.UTC)

func testPools() []*ipamv1.Pool {
	return []*ipamv1.Pool{
		{
			Name:   "pools/web",
			Ranges: []string{"192.0.2.0/24", "2001:db8::/64"},
			Status: &ipamv1.PoolStatus{Families: []*ipamv1.FamilyUsage{
				{Family: ipamv1.IPFamily_IP_FAMILY_IPV4, Size: "256", Used: 3, Free: "253"},
				{Family: ipamv1.IPFamily_IP_FAMILY_IPV6, Size: "18446744073709551616", Used: 1, Free: "18446744073709551615"},
			}},
			AllocationPolicy: &ipamv1.AllocationPolicy{Priority: 2},
		},
		{
			Name:       "pools/reserved",
			Ranges:     []string{"198.51.100.10-198.51.100.20"},
			AutoAssign: proto.Bool(false),
			Status: &ipamv1.PoolStatus{Families: []*ipamv1.FamilyUsage{
				{Family: ipamv1.IPFamily_IP_FAMILY_IPV4, Size: "11", Used: 0, Free: "11"},
			}},
		},
	}
}

func TestTables(t *testing.T) {
	tests := []struct {
		name  string
		write func(*bytes.Buffer) error
		want  string
	}{
		{
			name:  "pools",
			write: func(b *bytes.Buffer) error { return PoolTable(b, testPools()) },
			want: `NAME             RANGES                        AUTO    IPV4(USED/SIZE)   IPV6(USED/SIZE)          PRIORITY
pools/web        192.0.2.0/24,2001:db8::/64    true    3/256             1/18446744073709551616   2
pools/reserved   198.51.100.10-198.51.100.20   false   0/11              -                        -
`,
		},
		{
			name:  "no pools",
			write: func(b *bytes.Buffer) error { return PoolTable(b, nil) },
			want:  "NAME   RANGES   AUTO   IPV4(USED/SIZE)   IPV6(USED/SIZE)   PRIORITY\n",
		},
		{
			name: "allocations",
			write: func(b *bytes.Buffer) error {
				return AllocationTable(b, []*ipamv1.Allocation{
					{
						Name:       "tenants/acme/allocations/a0123456789abcdef0123",
						Owner:      "default/web",
						Addresses:  []string{"192.0.2.7", "2001:db8::7"},
						Pool:       "pools/web",
						ExpireTime: timestamppb.New(t0),
					},
					{
						Name:  "tenants/acme/allocations/afedcba9876543210fedc",
						Owner: "machine-42",
						Pool:  "pools/reserved",
					},
				})
			},
			want: `NAME                                             OWNER         ADDRESSES               POOL             EXPIRES
tenants/acme/allocations/a0123456789abcdef0123   default/web   192.0.2.7,2001:db8::7   pools/web        2026-03-04T05:06:07Z
tenants/acme/allocations/afedcba9876543210fedc   machine-42    -                       pools/reserved   -
`,
		},
		{
			name: "audit",
			write: func(b *bytes.Buffer) error {
				return AuditTable(b, []*ipamv1.AuditRecord{
					{
						Name:      "tenants/acme/auditRecords/2",
						Time:      timestamppb.New(t0.Add(time.Minute)),
						Action:    ipamv1.AuditRecord_ACTION_RELEASE,
						Actor:     "alice",
						Owner:     "default/web",
						Addresses: []string{"192.0.2.7"},
						Pool:      "pools/web",
					},
					{
						Name:   "tenants/acme/auditRecords/1",
						Time:   timestamppb.New(t0),
						Action: ipamv1.AuditRecord_ACTION_EXPIRE,
						Actor:  "system",
						Owner:  "machine-42",
					},
				})
			},
			want: `TIME                   ACTION    ACTOR    OWNER         ADDRESSES   POOL
2026-03-04T05:07:07Z   RELEASE   alice    default/web   192.0.2.7   pools/web
2026-03-04T05:06:07Z   EXPIRE    system   machine-42    -           -
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.write(&b); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("table (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWatchEventLine(t *testing.T) {
	tests := []struct {
		ev   *ipamv1.AllocationEvent
		want string
	}{
		{
			ev: &ipamv1.AllocationEvent{Type: ipamv1.AllocationEvent_TYPE_PUT, Allocation: &ipamv1.Allocation{
				Name: "tenants/acme/allocations/a1", Owner: "default/web", Addresses: []string{"192.0.2.7", "2001:db8::7"}, Pool: "pools/web",
			}},
			want: "PUT tenants/acme/allocations/a1 default/web 192.0.2.7,2001:db8::7 pools/web\n",
		},
		{
			ev: &ipamv1.AllocationEvent{Type: ipamv1.AllocationEvent_TYPE_DELETED, Allocation: &ipamv1.Allocation{
				Name: "tenants/lab/allocations/a2", Owner: "rack 7 host",
			}},
			want: "DELETED tenants/lab/allocations/a2 \"rack 7 host\" - -\n",
		},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := WatchEventLine(&b, tt.ev); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, b.String()); diff != "" {
			t.Errorf("WatchEventLine (-want +got):\n%s", diff)
		}
	}
}

func TestJSON(t *testing.T) {
	alloc := &ipamv1.Allocation{
		Name:       "tenants/acme/allocations/a1",
		Owner:      "default/web",
		IpFamilies: []ipamv1.IPFamily{ipamv1.IPFamily_IP_FAMILY_IPV4},
		Ports:      []*ipamv1.Port{{Port: 53, Protocol: ipamv1.Protocol_PROTOCOL_UDP}},
		Ttl:        durationpb.New(time.Hour),
		Addresses:  []string{"192.0.2.7"},
		ExpireTime: timestamppb.New(t0),
	}
	tests := []struct {
		name  string
		write func(*bytes.Buffer) error
		want  string
	}{
		{
			name:  "one",
			write: func(b *bytes.Buffer) error { return WriteJSON(b, alloc) },
			want: `{
  "name": "tenants/acme/allocations/a1",
  "owner": "default/web",
  "ipFamilies": [
    "IP_FAMILY_IPV4"
  ],
  "ports": [
    {
      "port": 53,
      "protocol": "PROTOCOL_UDP"
    }
  ],
  "ttl": "3600s",
  "addresses": [
    "192.0.2.7"
  ],
  "expireTime": "2026-03-04T05:06:07.000000800Z"
}
`,
		},
		{
			name: "list",
			write: func(b *bytes.Buffer) error {
				return WriteJSONList(b, []*ipamv1.Pool{
					{Name: "pools/a", AutoAssign: proto.Bool(false)},
					{Name: "pools/b", Labels: map[string]string{"env": "prod"}},
				})
			},
			want: `[
  {
    "name": "pools/a",
    "autoAssign": false
  },
  {
    "name": "pools/b",
    "labels": {
      "env": "prod"
    }
  }
]
`,
		},
		{
			name:  "empty list",
			write: func(b *bytes.Buffer) error { return WriteJSONList[*ipamv1.Pool](b, nil) },
			want:  "[]\n",
		},
		{
			name: "line",
			write: func(b *bytes.Buffer) error {
				return WriteJSONLine(b, &ipamv1.AllocationEvent{Type: ipamv1.AllocationEvent_TYPE_EXISTING, Allocation: &ipamv1.Allocation{Name: "tenants/acme/allocations/a1"}})
			},
			want: `{"type":"TYPE_EXISTING","allocation":{"name":"tenants/acme/allocations/a1"}}` + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.write(&b); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("JSON (-want +got):\n%s", diff)
			}
		})
	}
}

func withDetails(t *testing.T, c codes.Code, msg string, details ...protoadapt.MessageV1) error {
	t.Helper()
	st, err := status.New(c, msg).WithDetails(details...)
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestFormatError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{
			name: "plain error",
			err:  errors.New(`invalid pool name "a/b": want NAME or pools/NAME`),
			want: `error: invalid pool name "a/b": want NAME or pools/NAME`,
		},
		{
			name: "status without details",
			err:  status.Error(codes.NotFound, "pool pools/web not found"),
			want: "error: NotFound: pool pools/web not found",
		},
		{
			name: "message repeats the only violation",
			err: withDetails(t, codes.InvalidArgument, "pool.ranges[0]: host bits set; did you mean 192.0.2.0/24",
				&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
					{Field: "pool.ranges[0]", Description: "host bits set; did you mean 192.0.2.0/24"},
				}}),
			want: "error: InvalidArgument: pool.ranges[0]: host bits set; did you mean 192.0.2.0/24",
		},
		{
			name: "violations and reason",
			err: withDetails(t, codes.InvalidArgument, "invalid pool",
				&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
					{Field: "pool.ranges[0]", Description: "host bits set; did you mean 192.0.2.0/24"},
					{Field: "pool_id", Description: "must start with a letter"},
				}},
				&errdetails.ErrorInfo{Reason: "INVALID_POOL", Domain: "ipam.beacon", Metadata: map[string]string{"pool": "pools/9x", "count": "2"}}),
			want: `error: InvalidArgument: invalid pool
  pool.ranges[0]: host bits set; did you mean 192.0.2.0/24
  pool_id: must start with a letter
  reason: INVALID_POOL (count=2, pool=pools/9x)`,
		},
		{
			name: "precondition failure",
			err: withDetails(t, codes.FailedPrecondition, "pool overlaps another pool",
				&errdetails.PreconditionFailure{Violations: []*errdetails.PreconditionFailure_Violation{
					{Type: "OVERLAP", Subject: "pools/web", Description: "192.0.2.0/25 is in both"},
				}},
				&errdetails.ErrorInfo{Reason: "POOL_OVERLAP"}),
			want: `error: FailedPrecondition: pool overlaps another pool
  OVERLAP pools/web: 192.0.2.0/25 is in both
  reason: POOL_OVERLAP`,
		},
		{
			name: "unavailable gets a hint",
			err:  status.Error(codes.Unavailable, "connection refused"),
			want: "error: Unavailable: connection refused\n  hint: is the server running and reachable? Set it with --server or BEACON_SERVER.",
		},
		{
			name: "wrapped status",
			err:  fmt.Errorf("calling: %w", status.Error(codes.Aborted, "etag mismatch")),
			want: "error: Aborted: etag mismatch",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FormatError(tt.err)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FormatError (-want +got):\n%s", diff)
			}
			if strings.Contains(got, "goroutine") {
				t.Errorf("FormatError printed a stack: %s", got)
			}
		})
	}
}

func TestParseFormat(t *testing.T) {
	for _, s := range []string{"table", "json", "name", "JSON"} {
		if _, err := ParseFormat(s); err != nil {
			t.Errorf("ParseFormat(%q): %v", s, err)
		}
	}
	if _, err := ParseFormat("yaml"); err == nil {
		t.Error("ParseFormat(yaml) succeeded")
	}
}
