package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

const (
	webName = "tenants/acme/allocations/a82b3ade9d00cd1642a4d" // default/web in acme
	labName = "tenants/lab/allocations/a82edd6a5426cbeffa6fc"  // machine-42 in lab
)

func TestAllocRequests(t *testing.T) {
	seed := func(f *fakeIPAM) {
		f.allocs[webName] = &ipamv1.Allocation{Name: webName, Owner: "default/web", Addresses: []string{"192.0.2.7"}, Pool: "pools/web"}
	}
	tests := []struct {
		name    string
		args    []string
		want    []proto.Message
		wantErr string
	}{
		{
			name: "allocate minimal",
			args: []string{"alloc", "allocate", "default/db", "--tenant", "acme"},
			want: []proto.Message{&ipamv1.AllocateRequest{
				Parent:     "tenants/acme",
				Allocation: &ipamv1.Allocation{Owner: "default/db"},
			}},
		},
		{
			name: "create is allocate, every flag",
			args: []string{
				"alloc", "create", "default/dns", "--tenant", "tenants/acme", "--pool", "web",
				"--address", "192.0.2.53", "--address", "2001:db8::53",
				"--family", "ipv6", "--family", "IPv4", "--dual-stack", "require",
				"--sharing-key", "dns", "--port", "53/udp", "--port", "53", "--port", "9000/SCTP",
				"--namespace", "default", "--label", "app=dns", "--namespace-label", "team=net",
				"--owner-uid", "uid-1", "--ttl", "1h30m", "--request-id", "req-9",
			},
			want: []proto.Message{&ipamv1.AllocateRequest{
				Parent: "tenants/acme",
				Allocation: &ipamv1.Allocation{
					Owner:              "default/dns",
					OwnerUid:           "uid-1",
					Namespace:          "default",
					OwnerLabels:        map[string]string{"app": "dns"},
					NamespaceLabels:    map[string]string{"team": "net"},
					IpFamilies:         []ipamv1.IPFamily{ipamv1.IPFamily_IP_FAMILY_IPV6, ipamv1.IPFamily_IP_FAMILY_IPV4},
					IpFamilyPolicy:     ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_REQUIRE_DUAL_STACK,
					RequestedAddresses: []string{"192.0.2.53", "2001:db8::53"},
					RequestedPool:      "pools/web",
					SharingKey:         "dns",
					Ports: []*ipamv1.Port{
						{Port: 53, Protocol: ipamv1.Protocol_PROTOCOL_UDP},
						{Port: 53, Protocol: ipamv1.Protocol_PROTOCOL_TCP},
						{Port: 9000, Protocol: ipamv1.Protocol_PROTOCOL_SCTP},
					},
					Ttl: durationpb.New(90 * time.Minute),
				},
				RequestId: "req-9",
			}},
		},
		{
			name: "prefer dual-stack",
			args: []string{"alloc", "allocate", "m", "--tenant", "lab", "--dual-stack", "prefer"},
			want: []proto.Message{&ipamv1.AllocateRequest{
				Parent:     "tenants/lab",
				Allocation: &ipamv1.Allocation{Owner: "m", IpFamilyPolicy: ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_PREFER_DUAL_STACK},
			}},
		},
		{
			name: "several addresses",
			args: []string{"alloc", "allocate", "default/web", "--tenant", "acme", "--count", "3"},
			want: []proto.Message{&ipamv1.AllocateRequest{
				Parent:     "tenants/acme",
				Allocation: &ipamv1.Allocation{Owner: "default/web", AddressCount: 3},
			}},
		},
		{name: "allocate needs a tenant", args: []string{"alloc", "allocate", "default/db"}, wantErr: "--tenant is required"},
		{name: "allocate in every tenant", args: []string{"alloc", "allocate", "default/db", "--tenant", "-"}, wantErr: "cannot hold an allocation"},
		{name: "bad family", args: []string{"alloc", "allocate", "x", "--tenant", "acme", "--family", "ipx"}, wantErr: `--family "ipx"`},
		{name: "bad dual-stack", args: []string{"alloc", "allocate", "x", "--tenant", "acme", "--dual-stack", "yes"}, wantErr: `--dual-stack "yes"`},
		{name: "bad port", args: []string{"alloc", "allocate", "x", "--tenant", "acme", "--port", "70000/tcp"}, wantErr: `--port "70000/tcp"`},
		{name: "bad protocol", args: []string{"alloc", "allocate", "x", "--tenant", "acme", "--port", "80/icmp"}, wantErr: "protocol must be"},
		{
			name: "get by name",
			args: []string{"alloc", "get", webName},
			want: []proto.Message{&ipamv1.GetAllocationRequest{Name: webName}},
		},
		{
			name: "get by owner",
			args: []string{"alloc", "get", "default/web", "--tenant", "acme"},
			want: []proto.Message{&ipamv1.GetAllocationRequest{Name: webName}},
		},
		{name: "get by owner without tenant", args: []string{"alloc", "get", "default/web"}, wantErr: "add --tenant"},
		{name: "get from another tenant", args: []string{"alloc", "get", webName, "--tenant", "lab"}, wantErr: "is not in --tenant lab"},
		{
			name: "list every tenant by default",
			args: []string{"alloc", "list"},
			want: []proto.Message{&ipamv1.ListAllocationsRequest{Parent: "tenants/-"}},
		},
		{
			name: "list with filter and page size",
			args: []string{"alloc", "list", "--tenant", "acme", "--filter", `pool = "pools/web"`, "--page-size", "50"},
			want: []proto.Message{&ipamv1.ListAllocationsRequest{Parent: "tenants/acme", Filter: `pool = "pools/web"`, PageSize: 50}},
		},
		{
			name: "list holds",
			args: []string{"alloc", "list", "--held", "--tenant", "acme"},
			want: []proto.Message{&ipamv1.ListAllocationsRequest{Parent: "tenants/acme", Held: true}},
		},
		{
			name: "release by name, server's hold",
			args: []string{"alloc", "release", webName},
			want: []proto.Message{&ipamv1.ReleaseRequest{Name: webName}},
		},
		{
			name: "release by owner with hold and etag",
			args: []string{"alloc", "release", "default/web", "--tenant", "acme", "--hold", "5m", "--etag", "e1", "--request-id", "r"},
			want: []proto.Message{&ipamv1.ReleaseRequest{
				Parent: "tenants/acme", Owner: "default/web", Hold: durationpb.New(5 * time.Minute), Etag: "e1", RequestId: "r",
			}},
		},
		{
			name: "release now",
			args: []string{"alloc", "release", webName, "--hold", "0"},
			want: []proto.Message{&ipamv1.ReleaseRequest{Name: webName, Hold: durationpb.New(0)}},
		},
		{name: "negative hold", args: []string{"alloc", "release", webName, "--hold", "-1s"}, wantErr: "--hold must not be negative"},
		{
			name: "renew with own TTL",
			args: []string{"alloc", "renew", webName},
			want: []proto.Message{&ipamv1.RenewAllocationRequest{Name: webName}},
		},
		{
			name: "renew by owner with TTL and etag",
			args: []string{"alloc", "renew", "default/web", "--tenant", "acme", "--ttl", "2h", "--etag", "e1"},
			want: []proto.Message{&ipamv1.RenewAllocationRequest{Name: webName, Ttl: durationpb.New(2 * time.Hour), Etag: "e1"}},
		},
		{
			name: "audit list",
			args: []string{"audit", "list", "--tenant", "acme", "--filter", `action = "RELEASE"`},
			want: []proto.Message{&ipamv1.ListAuditRecordsRequest{Parent: "tenants/acme", Filter: `action = "RELEASE"`}},
		},
		{
			name: "audit list every tenant",
			args: []string{"audit", "list"},
			want: []proto.Message{&ipamv1.ListAuditRecordsRequest{Parent: "tenants/-"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			seed(f)
			res := runAt(t, f.start(t), tt.args...)
			checkRequests(t, f, res, tt.wantErr, tt.want)
		})
	}
}

func TestAllocOutput(t *testing.T) {
	f := newFake()
	addr := f.start(t)
	steps := []struct {
		args       []string
		wantStdout string
		wantStderr string
	}{
		{
			args: []string{"alloc", "allocate", "default/web", "--tenant", "acme", "--address", "192.0.2.7"},
			wantStdout: `NAME                                             OWNER         ADDRESSES   POOL        EXPIRES
tenants/acme/allocations/a82b3ade9d00cd1642a4d   default/web   192.0.2.7   pools/web   -
`,
		},
		{
			args:       []string{"alloc", "allocate", "default/web", "--tenant", "acme"},
			wantStdout: "",
			wantStderr: "default/web already held an allocation satisfying the request; returned unchanged\n",
		},
		{args: []string{"alloc", "allocate", "machine-42", "--tenant", "lab", "--pool", "lab", "-o", "name"}, wantStdout: labName + "\n"},
		{
			args: []string{"alloc", "renew", "machine-42", "--tenant", "lab", "-o", "json"},
			wantStdout: `{
  "name": "tenants/lab/allocations/a82edd6a5426cbeffa6fc",
  "owner": "machine-42",
  "requestedPool": "pools/lab",
  "addresses": [
    "192.0.2.2"
  ],
  "pool": "pools/lab",
  "expireTime": "2030-01-01T00:00:00Z",
  "etag": "e1"
}
`,
		},
		{
			args: []string{"alloc", "list"},
			wantStdout: `NAME                                             OWNER         ADDRESSES   POOL        EXPIRES
tenants/acme/allocations/a82b3ade9d00cd1642a4d   default/web   192.0.2.7   pools/web   -
tenants/lab/allocations/a82edd6a5426cbeffa6fc    machine-42    192.0.2.2   pools/lab   2030-01-01T00:00:00Z
`,
		},
		{args: []string{"alloc", "list", "--tenant", "lab", "-o", "name"}, wantStdout: labName + "\n"},
		{args: []string{"alloc", "release", "machine-42", "--tenant", "lab", "--hold", "1h"}, wantStdout: "released " + labName + ": 192.0.2.2, held for the owner until 2030-01-02T03:04:05Z\n"},
		{args: []string{"alloc", "release", webName, "-o", "json"}, wantStdout: "{\n  \"addresses\": [\n    \"192.0.2.7\"\n  ]\n}\n"},
		{args: []string{"alloc", "list", "-o", "json"}, wantStdout: "[]\n"},
	}
	for _, s := range steps {
		res := runAt(t, addr, s.args...)
		if res.err != nil {
			t.Fatalf("%v: %v", s.args, res.err)
		}
		if s.wantStdout != "" || s.wantStderr != "" {
			if s.wantStdout != "" {
				if diff := cmp.Diff(s.wantStdout, res.stdout); diff != "" {
					t.Errorf("%v: stdout (-want +got):\n%s", s.args, diff)
				}
			}
			if diff := cmp.Diff(s.wantStderr, res.stderr); diff != "" {
				t.Errorf("%v: stderr (-want +got):\n%s", s.args, diff)
			}
		}
	}
}

func TestPaging(t *testing.T) {
	f := newFake()
	f.pageSize = 2
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		f.pools["pools/"+n] = &ipamv1.Pool{Name: "pools/" + n}
	}
	addr := f.start(t)

	res := runAt(t, addr, "pool", "list", "-o", "name")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if diff := cmp.Diff("pools/a\npools/b\npools/c\npools/d\npools/e\n", res.stdout); diff != "" {
		t.Errorf("every page (-want +got):\n%s", diff)
	}
	if got := len(f.recorded()); got != 3 {
		t.Errorf("every page took %d calls, want 3", got)
	}

	res = runAt(t, addr, "pool", "list", "-o", "name", "--all=false", "--page-token", "2")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if diff := cmp.Diff("pools/c\npools/d\n", res.stdout); diff != "" {
		t.Errorf("one page (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("more results: run again with --page-token 4\n", res.stderr); diff != "" {
		t.Errorf("one page stderr (-want +got):\n%s", diff)
	}
}

func TestAuditOutput(t *testing.T) {
	f := newFake()
	f.pageSize = 1
	f.audit = []*ipamv1.AuditRecord{
		{Name: "tenants/acme/auditRecords/2", Action: ipamv1.AuditRecord_ACTION_RELEASE, Actor: "alice", Owner: "default/web", Addresses: []string{"192.0.2.7"}, Pool: "pools/web"},
		{Name: "tenants/lab/auditRecords/1", Action: ipamv1.AuditRecord_ACTION_ALLOCATE, Actor: "bob", Owner: "machine-42", Addresses: []string{"192.0.2.2", "2001:db8::2"}, Pool: "pools/lab"},
	}
	res := runAt(t, f.start(t), "audit", "list")
	if res.err != nil {
		t.Fatal(res.err)
	}
	want := `TIME   ACTION     ACTOR   OWNER         ADDRESSES               POOL
-      RELEASE    alice   default/web   192.0.2.7               pools/web
-      ALLOCATE   bob     machine-42    192.0.2.2,2001:db8::2   pools/lab
`
	if diff := cmp.Diff(want, res.stdout); diff != "" {
		t.Errorf("audit list (-want +got):\n%s", diff)
	}
}

func TestWatch(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		want   string
		wantRq *ipamv1.WatchAllocationsRequest
	}{
		{
			name:   "table",
			args:   []string{"alloc", "watch"},
			want:   "EXISTING " + webName + " default/web 192.0.2.7 pools/web\nPUT " + labName + " machine-42 192.0.2.2 pools/lab\n",
			wantRq: &ipamv1.WatchAllocationsRequest{Parent: "tenants/-"},
		},
		{
			name: "json",
			args: []string{"alloc", "watch", "--tenant", "acme", "-o", "json"},
			want: `{"type":"TYPE_EXISTING","allocation":{"name":"` + webName + `","owner":"default/web","addresses":["192.0.2.7"],"pool":"pools/web"}}` + "\n" +
				`{"type":"TYPE_PUT","allocation":{"name":"` + labName + `","owner":"machine-42","addresses":["192.0.2.2"],"pool":"pools/lab"}}` + "\n",
			wantRq: &ipamv1.WatchAllocationsRequest{Parent: "tenants/acme"},
		},
		{
			name:   "resume",
			args:   []string{"alloc", "watch", "--resume", "r0", "-o", "name"},
			want:   labName + "\n",
			wantRq: &ipamv1.WatchAllocationsRequest{Parent: "tenants/-", ResumeToken: "r0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.allocs[webName] = &ipamv1.Allocation{Name: webName, Owner: "default/web", Addresses: []string{"192.0.2.7"}, Pool: "pools/web"}
			f.watchSend = &ipamv1.WatchAllocationsResponse{
				Events: []*ipamv1.AllocationEvent{{Type: ipamv1.AllocationEvent_TYPE_PUT, Allocation: &ipamv1.Allocation{
					Name: labName, Owner: "machine-42", Addresses: []string{"192.0.2.2"}, Pool: "pools/lab",
				}}},
				ResumeToken: "r2",
			}
			addr := f.start(t)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stdout, stderr syncBuffer
			cmd := NewRootCommand(Env{Stdout: &stdout, Stderr: &stderr})
			cmd.SetArgs(append([]string{"--plaintext", "--server", addr}, tt.args...))
			done := make(chan error, 1)
			go func() { done <- cmd.ExecuteContext(ctx) }()

			deadline := time.Now().Add(10 * time.Second)
			for stdout.String() != tt.want && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			cancel() // Ctrl-C.
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("watch stopped with %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("watch did not stop when cancelled")
			}
			if diff := cmp.Diff(tt.want, stdout.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff("watch stopped; resume with --resume r2\n", stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
			checkRequests(t, f, result{}, "", []proto.Message{tt.wantRq})
		})
	}
}

func TestWatchEndsWithServerError(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		then       error
		wantErr    string
		wantStderr string
	}{
		{
			name:       "server goes away",
			args:       []string{"alloc", "watch"},
			then:       status.Error(codes.Unavailable, "server shutting down"),
			wantErr:    "error: Unavailable: server shutting down",
			wantStderr: "watch stopped; resume with --resume r1\n",
		},
		{
			name:    "token too old",
			args:    []string{"alloc", "watch", "--resume", "old"},
			then:    status.Error(codes.OutOfRange, "resume token too old"),
			wantErr: "error: OutOfRange: resume token too old",
		},
		{
			name:       "server ends the stream",
			args:       []string{"alloc", "watch"},
			wantStderr: "watch stopped; resume with --resume r1\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.watchThen = func(context.Context) error { return tt.then }
			res := runAt(t, f.start(t), tt.args...)
			if got := output.FormatError(res.err); !strings.HasPrefix(got, tt.wantErr) {
				t.Errorf("error %q, want %q", got, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantStderr, res.stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}
