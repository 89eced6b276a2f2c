package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	"github.com/beaconlb/beacon/pkg/ipamtest"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

const (
	webName = "tenants/acme/allocations/a82b3ade9d00cd1642a4d" // default/web in acme
	labName = "tenants/lab/allocations/a82edd6a5426cbeffa6fc"  // machine-42 in lab
)

func TestAllocRequests(t *testing.T) {
	tests := []struct {
		name string
		// args: ETAG stands for default/web's etag.
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
				"--address", "198.51.100.53", "--address", "2001:db8::53",
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
					RequestedAddresses: []string{"198.51.100.53", "2001:db8::53"},
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
			args: []string{"alloc", "allocate", "default/multi", "--tenant", "acme", "--count", "3"},
			want: []proto.Message{&ipamv1.AllocateRequest{
				Parent:     "tenants/acme",
				Allocation: &ipamv1.Allocation{Owner: "default/multi", AddressCount: 3},
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
			args: []string{"alloc", "release", "default/web", "--tenant", "acme", "--hold", "5m", "--etag", placeholder, "--request-id", "r"},
			want: []proto.Message{&ipamv1.ReleaseRequest{
				Parent: "tenants/acme", Owner: "default/web", Hold: durationpb.New(5 * time.Minute), Etag: placeholder, RequestId: "r",
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
			args: []string{"alloc", "renew", "default/web", "--tenant", "acme", "--ttl", "2h", "--etag", placeholder},
			want: []proto.Message{&ipamv1.RenewAllocationRequest{Name: webName, Ttl: durationpb.New(2 * time.Hour), Etag: placeholder}},
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
	ipam := newIPAM(t)
	ipam.pool("web", "198.51.100.0/26", "2001:db8::/120")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// default/web holds an address (again, if a case released it).
			web := ipam.allocate("acme", "default/web", "web", func(a *ipamv1.Allocation) { a.Ttl = durationpb.New(time.Hour) })
			args, want := fill(tt.args, tt.want, web.GetEtag())
			f, addr := ipam.record(t)
			res := runAt(t, addr, args...)
			checkRequests(t, f, res, tt.wantErr, want)
		})
	}
}

func TestAllocOutput(t *testing.T) {
	ipam := newIPAM(t)
	ipam.pool("web", "198.51.100.0/28")
	ipam.pool("lab", "203.0.113.16/28")
	addr := ipam.addr
	steps := []struct {
		args       []string
		wantStdout string
		wantStderr string
	}{
		{
			args: []string{"alloc", "allocate", "default/web", "--tenant", "acme", "--address", "198.51.100.7"},
			wantStdout: `NAME                                             OWNER         ADDRESSES      POOL        EXPIRES
tenants/acme/allocations/a82b3ade9d00cd1642a4d   default/web   198.51.100.7   pools/web   -
`,
		},
		{
			args: []string{"alloc", "allocate", "default/web", "--tenant", "acme"},
			wantStdout: `NAME                                             OWNER         ADDRESSES      POOL        EXPIRES
tenants/acme/allocations/a82b3ade9d00cd1642a4d   default/web   198.51.100.7   pools/web   -
`,
			wantStderr: "default/web already held an allocation satisfying the request; returned unchanged\n",
		},
		{args: []string{"alloc", "allocate", "machine-42", "--tenant", "lab", "--pool", "lab", "--ttl", "1h", "-o", "name"}, wantStdout: labName + "\n"},
		{
			args: []string{"alloc", "renew", "machine-42", "--tenant", "lab", "-o", "json"},
			wantStdout: `{
  "name": "tenants/lab/allocations/a82edd6a5426cbeffa6fc",
  "uid": "UID",
  "owner": "machine-42",
  "ipFamilyPolicy": "IP_FAMILY_POLICY_SINGLE_STACK",
  "requestedPool": "pools/lab",
  "trafficPolicy": "TRAFFIC_POLICY_CLUSTER",
  "ttl": "3600s",
  "addresses": [
    "203.0.113.16"
  ],
  "pool": "pools/lab",
  "expireTime": "TIME",
  "etag": "ETAG",
  "createTime": "TIME",
  "updateTime": "TIME"
}
`,
		},
		{
			args: []string{"alloc", "list"},
			wantStdout: `NAME                                             OWNER         ADDRESSES      POOL        EXPIRES
tenants/acme/allocations/a82b3ade9d00cd1642a4d   default/web   198.51.100.7   pools/web   -
tenants/lab/allocations/a82edd6a5426cbeffa6fc    machine-42    203.0.113.16   pools/lab   TIME
`,
		},
		{args: []string{"alloc", "list", "--tenant", "lab", "-o", "name"}, wantStdout: labName + "\n"},
		{args: []string{"alloc", "release", "machine-42", "--tenant", "lab", "--hold", "1h"}, wantStdout: "released " + labName + ": 203.0.113.16, held for the owner until TIME\n"},
		{args: []string{"alloc", "release", webName, "-o", "json"}, wantStdout: "{\n  \"addresses\": [\n    \"198.51.100.7\"\n  ]\n}\n"},
		{args: []string{"alloc", "list", "-o", "json"}, wantStdout: "[]\n"},
		{args: []string{"alloc", "list", "--held", "-o", "name"}, wantStdout: labName + "\n"},
	}
	for _, s := range steps {
		res := runAt(t, addr, s.args...)
		if res.err != nil {
			t.Fatalf("%v: %v", s.args, res.err)
		}
		if diff := cmp.Diff(s.wantStdout, normalize(res.stdout)); diff != "" {
			t.Errorf("%v: stdout (-want +got):\n%s", s.args, diff)
		}
		if diff := cmp.Diff(s.wantStderr, res.stderr); diff != "" {
			t.Errorf("%v: stderr (-want +got):\n%s", s.args, diff)
		}
	}
}

// TestPaging lists pools two a call: every page, then one page at a time
// from the token the previous page printed.
func TestPaging(t *testing.T) {
	ipam := newIPAM(t)
	for i, n := range []string{"a", "b", "c", "d", "e"} {
		ipam.pool(n, fmt.Sprintf("198.51.100.%d/29", 8*i))
	}
	f, addr := ipam.record(t)

	res := runAt(t, addr, "pool", "list", "-o", "name", "--page-size", "2")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if diff := cmp.Diff("pools/a\npools/b\npools/c\npools/d\npools/e\n", res.stdout); diff != "" {
		t.Errorf("every page (-want +got):\n%s", diff)
	}
	if got := len(f.recorded()); got != 3 {
		t.Errorf("every page took %d calls, want 3", got)
	}

	var got []string
	args := []string{"pool", "list", "-o", "name", "--page-size", "2", "--all=false"}
	for page := 0; ; page++ {
		res := runAt(t, addr, args...)
		if res.err != nil {
			t.Fatal(res.err)
		}
		got = append(got, res.stdout)
		token, more := strings.CutPrefix(res.stderr, "more results: run again with --page-token ")
		if !more {
			if res.stderr != "" {
				t.Errorf("last page: stderr %q, want nothing", res.stderr)
			}
			break
		}
		if page == 3 {
			t.Fatalf("a fourth page of two pools out of five: %q", got)
		}
		args = []string{"pool", "list", "-o", "name", "--page-size", "2", "--all=false", "--page-token", strings.TrimSuffix(token, "\n")}
	}
	if diff := cmp.Diff([]string{"pools/a\npools/b\n", "pools/c\npools/d\n", "pools/e\n"}, got); diff != "" {
		t.Errorf("one page at a time (-want +got):\n%s", diff)
	}
}

func TestAuditOutput(t *testing.T) {
	ipam := newIPAM(t)
	ipam.pool("web", "198.51.100.0/28")
	ipam.pool("lab", "203.0.113.16/28")
	ipam.allocate("acme", "default/web", "web")
	if _, err := ipamv1.NewAllocationServiceClient(ipam.conn).Release(ipam.ctx(), &ipamv1.ReleaseRequest{Name: webName}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	ipam.allocate("lab", "machine-42", "lab", func(a *ipamv1.Allocation) { a.IpFamilies = []ipamv1.IPFamily{ipamv1.IPFamily_IP_FAMILY_IPV4} })
	res := runAt(t, ipam.addr, "audit", "list", "--page-size", "1")
	if res.err != nil {
		t.Fatal(res.err)
	}
	// Newest first; the times are real, so the columns are compared
	// without their padding.
	want := `TIME ACTION ACTOR OWNER ADDRESSES POOL
TIME RELEASE anonymous default/web 198.51.100.0 pools/web
TIME ALLOCATE anonymous default/web 198.51.100.0 pools/web
TIME ALLOCATE anonymous machine-42 203.0.113.16 pools/lab
`
	if diff := cmp.Diff(want, unpadded(normalize(res.stdout))); diff != "" {
		t.Errorf("audit list (-want +got):\n%s", diff)
	}
}

// TestWatch watches for real: the snapshot, an allocation made while
// watching, and a resume from the token printed when the watch stops.
func TestWatch(t *testing.T) {
	ipam := newIPAM(t)
	ipam.pool("web", "198.51.100.0/28")
	ipam.pool("lab", "203.0.113.16/28")
	ipam.allocate("acme", "default/web", "web", func(a *ipamv1.Allocation) { a.RequestedAddresses = []string{"198.51.100.7"} })
	f, addr := ipam.record(t)
	resume := ""
	tests := []struct {
		name string
		args func() []string
		// then runs once the first event is printed.
		then   func()
		want   string
		wantRq func() *ipamv1.WatchAllocationsRequest
	}{
		{
			name: "table",
			args: func() []string { return []string{"alloc", "watch"} },
			then: func() { ipam.allocate("lab", "machine-42", "lab") },
			want: "EXISTING " + webName + " default/web 198.51.100.7 pools/web\nPUT " + labName + " machine-42 203.0.113.16 pools/lab\n",
			wantRq: func() *ipamv1.WatchAllocationsRequest {
				return &ipamv1.WatchAllocationsRequest{Parent: "tenants/-"}
			},
		},
		{
			name: "json, one tenant",
			args: func() []string { return []string{"alloc", "watch", "--tenant", "acme", "-o", "json"} },
			then: func() { ipam.allocate("acme", "default/db", "web") },
			want: `{"type":"TYPE_EXISTING","allocation":{"name":"` + webName + `","uid":"UID","owner":"default/web","ipFamilyPolicy":"IP_FAMILY_POLICY_SINGLE_STACK","requestedAddresses":["198.51.100.7"],"requestedPool":"pools/web","trafficPolicy":"TRAFFIC_POLICY_CLUSTER","addresses":["198.51.100.7"],"pool":"pools/web","etag":"ETAG","createTime":"TIME","updateTime":"TIME"}}` + "\n" +
				`{"type":"TYPE_PUT","allocation":{"name":"` + allocationName("tenants/acme", "default/db") + `","uid":"UID","owner":"default/db","ipFamilyPolicy":"IP_FAMILY_POLICY_SINGLE_STACK","requestedPool":"pools/web","trafficPolicy":"TRAFFIC_POLICY_CLUSTER","addresses":["198.51.100.0"],"pool":"pools/web","etag":"ETAG","createTime":"TIME","updateTime":"TIME"}}` + "\n",
			wantRq: func() *ipamv1.WatchAllocationsRequest {
				return &ipamv1.WatchAllocationsRequest{Parent: "tenants/acme"}
			},
		},
		{
			name: "resume",
			args: func() []string { return []string{"alloc", "watch", "--resume", resume, "-o", "name"} },
			// Made after the first watch's token: machine-44, then default/db.
			want: allocationName("tenants/lab", "machine-44") + "\n" + allocationName("tenants/acme", "default/db") + "\n",
			wantRq: func() *ipamv1.WatchAllocationsRequest {
				return &ipamv1.WatchAllocationsRequest{Parent: "tenants/-", ResumeToken: resume}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.recorded())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var stdout, stderr syncBuffer
			cmd := NewRootCommand(Env{Stdout: &stdout, Stderr: &stderr})
			cmd.SetArgs(append([]string{"--plaintext", "--server", addr}, tt.args()...))
			done := make(chan error, 1)
			go func() { done <- cmd.ExecuteContext(ctx) }()

			if tt.then != nil {
				if !stdout.waitFor(30*time.Second, func(s string) bool { return s != "" }) {
					t.Fatal("no event within 30s")
				}
				tt.then()
			}
			stdout.waitFor(30*time.Second, func(s string) bool { return normalize(s) == tt.want })
			cancel() // Ctrl-C.
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("watch stopped with %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("watch did not stop when cancelled")
			}
			if diff := cmp.Diff(tt.want, normalize(stdout.String())); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			token, ok := strings.CutPrefix(stderr.String(), "watch stopped; resume with --resume ")
			if !ok || strings.Count(token, "\n") != 1 || !strings.HasSuffix(token, "\n") {
				t.Fatalf("stderr %q, want a line telling how to resume", stderr.String())
			}
			if resume == "" {
				resume = strings.TrimSuffix(token, "\n")
				ipam.allocate("lab", "machine-44", "lab") // after the token: a resume sees it
			}
			if diff := cmp.Diff([]proto.Message{tt.wantRq()}, f.recorded()[before:], protocmp.Transform()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWatchEndsWithServerError ends watches the ways a real server ends
// them: it crashes, it shuts down, or it refuses the resume token.
func TestWatchEndsWithServerError(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		end        func(*ipamtest.Replica)
		wantErr    string
		wantResume bool
	}{
		{name: "server crashes", args: []string{"alloc", "watch"}, end: (*ipamtest.Replica).Kill, wantErr: "error: Unavailable", wantResume: true},
		{name: "server shuts down", args: []string{"alloc", "watch"}, end: func(r *ipamtest.Replica) { _ = r.Stop(ipamtest.StopTimeout) }, wantErr: "error: Unavailable: this IPAM replica is stopping: reconnect", wantResume: true},
		{name: "token not the server's", args: []string{"alloc", "watch", "--resume", "old"}, wantErr: "error: InvalidArgument: resume_token: is not a resume token returned by this API"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ipam := ipamtest.Start(t, ipamtest.Options{})
			r := ipam.Replicas[0]
			seed := &testIPAM{t: t, addr: r.Addr, conn: r.Conn(t)}
			seed.pool("web", "198.51.100.0/28")
			seed.allocate("acme", "default/web", "web")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var stdout, stderr syncBuffer
			cmd := NewRootCommand(Env{Stdout: &stdout, Stderr: &stderr})
			cmd.SetArgs(append([]string{"--plaintext", "--server", r.Addr}, tt.args...))
			done := make(chan error, 1)
			go func() { done <- cmd.ExecuteContext(ctx) }()
			if tt.end != nil {
				// The stream is open once the snapshot is printed.
				if !stdout.waitFor(30*time.Second, func(s string) bool { return s != "" }) {
					t.Fatal("no snapshot within 30s")
				}
				tt.end(r)
			}
			var err error
			select {
			case err = <-done:
			case <-ctx.Done():
				t.Fatal("watch did not end")
			}
			if got := output.FormatError(err); !strings.HasPrefix(got, tt.wantErr) {
				t.Errorf("error %q, want %q", got, tt.wantErr)
			}
			if got := strings.HasPrefix(stderr.String(), "watch stopped; resume with --resume "); got != tt.wantResume {
				t.Errorf("stderr %q: resume hint %v, want %v", stderr.String(), got, tt.wantResume)
			}
		})
	}
}
