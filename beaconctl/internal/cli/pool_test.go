package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// checkRequests compares what the fake received with want, or checks that
// the run failed with an error containing wantErr (and then that it sent
// want, usually nothing).
func checkRequests(t *testing.T, f *fakeIPAM, res result, wantErr string, want []proto.Message) {
	t.Helper()
	switch {
	case wantErr == "" && res.err != nil:
		t.Fatalf("unexpected error: %v\nstderr: %s", res.err, res.stderr)
	case wantErr != "" && res.err == nil:
		t.Fatalf("no error, want one containing %q", wantErr)
	case wantErr != "" && !strings.Contains(res.err.Error(), wantErr):
		t.Fatalf("error %q does not contain %q", res.err, wantErr)
	}
	if diff := cmp.Diff(want, f.recorded(), protocmp.Transform()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestPoolCreateRequest(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    *ipamv1.CreatePoolRequest
		wantErr string
	}{
		{
			name: "minimal",
			args: []string{"web", "--range", "192.0.2.0/24"},
			want: &ipamv1.CreatePoolRequest{PoolId: "web", Pool: &ipamv1.Pool{Ranges: []string{"192.0.2.0/24"}}},
		},
		{
			name: "full name and comma-separated ranges",
			args: []string{"pools/web", "--range", "192.0.2.0/24,2001:db8::/64", "--range", "198.51.100.10-198.51.100.20"},
			want: &ipamv1.CreatePoolRequest{PoolId: "web", Pool: &ipamv1.Pool{
				Ranges: []string{"192.0.2.0/24", "2001:db8::/64", "198.51.100.10-198.51.100.20"},
			}},
		},
		{
			name: "every flag",
			args: []string{
				"prod", "--range", "203.0.113.0/25", "--exclude", "203.0.113.1", "--exclude", "203.0.113.2-203.0.113.3",
				"--no-auto-assign", "--avoid-buggy-ips", "--tenant", "acme", "--tenant", "globex",
				"--priority", "1", "--namespace", "prod", "--namespace", "edge",
				"--label", "env=prod", "--label", "note=a,b", "--label", "empty=",
				"--description", "prod services", "--request-id", "req-1", "--validate-only",
			},
			want: &ipamv1.CreatePoolRequest{
				PoolId: "prod",
				Pool: &ipamv1.Pool{
					Description:   "prod services",
					Ranges:        []string{"203.0.113.0/25"},
					Exclusions:    []string{"203.0.113.1", "203.0.113.2-203.0.113.3"},
					AutoAssign:    proto.Bool(false),
					AvoidBuggyIps: true,
					Tenants:       []string{"acme", "globex"},
					AllocationPolicy: &ipamv1.AllocationPolicy{
						Priority:   1,
						Namespaces: []string{"prod", "edge"},
					},
					Labels: map[string]string{"env": "prod", "note": "a,b", "empty": ""},
				},
				RequestId:    "req-1",
				ValidateOnly: true,
			},
		},
		{
			name: "namespace alone makes a policy",
			args: []string{"web", "--range", "192.0.2.0/24", "--namespace", "default"},
			want: &ipamv1.CreatePoolRequest{PoolId: "web", Pool: &ipamv1.Pool{
				Ranges:           []string{"192.0.2.0/24"},
				AllocationPolicy: &ipamv1.AllocationPolicy{Namespaces: []string{"default"}},
			}},
		},
		{name: "no range", args: []string{"web"}, wantErr: "at least one --range"},
		{name: "bad label", args: []string{"web", "--range", "192.0.2.0/24", "--label", "env"}, wantErr: `--label "env": want KEY=VALUE`},
		{name: "bad name", args: []string{"a/b", "--range", "192.0.2.0/24"}, wantErr: `invalid pool name "a/b"`},
		{name: "negative priority", args: []string{"web", "--range", "192.0.2.0/24", "--priority", "-1"}, wantErr: "--priority"},
		{name: "missing name", args: []string{"--range", "192.0.2.0/24"}, wantErr: "missing NAME"},
		{name: "unknown flag", args: []string{"web", "--ranges", "192.0.2.0/24"}, wantErr: "unknown flag: --ranges"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			res := runAt(t, f.start(t), append([]string{"pool", "create"}, tt.args...)...)
			var want []proto.Message
			if tt.want != nil {
				want = append(want, tt.want)
			}
			checkRequests(t, f, res, tt.wantErr, want)
		})
	}
}

func TestPoolUpdateRequest(t *testing.T) {
	current := &ipamv1.Pool{
		Name:       "pools/web",
		Ranges:     []string{"192.0.2.0/24", "2001:db8::/64"},
		Exclusions: []string{"192.0.2.1"},
		Labels:     map[string]string{"env": "dev", "team": "net"},
		Etag:       "e1",
	}
	get := &ipamv1.GetPoolRequest{Name: "pools/web"}
	update := func(p *ipamv1.Pool, paths ...string) *ipamv1.UpdatePoolRequest {
		p.Name = "pools/web"
		return &ipamv1.UpdatePoolRequest{Pool: p, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}
	}
	tests := []struct {
		name    string
		args    []string
		want    []proto.Message
		wantErr string
	}{
		{
			name: "add range reads the pool and sends its etag",
			args: []string{"web", "--add-range", "198.51.100.0/24"},
			want: []proto.Message{get, update(&ipamv1.Pool{
				Ranges: []string{"192.0.2.0/24", "2001:db8::/64", "198.51.100.0/24"},
				Etag:   "e1",
			}, "ranges")},
		},
		{
			name: "remove and add, matching ranges by value",
			args: []string{"pools/web", "--remove-range", "2001:DB8::/64", "--add-range", "192.0.2.0/24,2001:db8:1::/64"},
			want: []proto.Message{get, update(&ipamv1.Pool{
				Ranges: []string{"192.0.2.0/24", "2001:db8:1::/64"},
				Etag:   "e1",
			}, "ranges")},
		},
		{
			name:    "remove a range the pool lacks",
			args:    []string{"web", "--remove-range", "203.0.113.0/24"},
			want:    []proto.Message{get},
			wantErr: "the pool has no such range",
		},
		{
			name: "set exclusions needs no read",
			args: []string{"web", "--set-exclusions", "192.0.2.1,192.0.2.254"},
			want: []proto.Message{update(&ipamv1.Pool{Exclusions: []string{"192.0.2.1", "192.0.2.254"}}, "exclusions")},
		},
		{
			name: "clear exclusions",
			args: []string{"web", "--set-exclusions", ""},
			want: []proto.Message{update(&ipamv1.Pool{}, "exclusions")},
		},
		{
			name: "auto-assign off with an etag",
			args: []string{"web", "--auto-assign=false", "--etag", "e1"},
			want: []proto.Message{update(&ipamv1.Pool{AutoAssign: proto.Bool(false), Etag: "e1"}, "auto_assign")},
		},
		{
			name: "auto-assign on",
			args: []string{"web", "--auto-assign"},
			want: []proto.Message{update(&ipamv1.Pool{AutoAssign: proto.Bool(true)}, "auto_assign")},
		},
		{
			name: "labels are edited",
			args: []string{"web", "--label", "env=prod", "--label", "team-", "--label", "tier=1"},
			want: []proto.Message{get, update(&ipamv1.Pool{
				Labels: map[string]string{"env": "prod", "tier": "1"},
				Etag:   "e1",
			}, "labels")},
		},
		{
			name: "the user's etag wins over the one read",
			args: []string{"web", "--add-range", "198.51.100.0/24", "--etag", "e0"},
			want: []proto.Message{get, update(&ipamv1.Pool{
				Ranges: []string{"192.0.2.0/24", "2001:db8::/64", "198.51.100.0/24"},
				Etag:   "e0",
			}, "ranges")},
			wantErr: "Aborted",
		},
		{
			name: "mask in field order",
			args: []string{"web", "--set-tenants", "acme", "--description", "d", "--avoid-buggy-ips", "--set-exclusions", "192.0.2.9", "--request-id", "r", "--validate-only"},
			want: []proto.Message{&ipamv1.UpdatePoolRequest{
				Pool: &ipamv1.Pool{
					Name:          "pools/web",
					Description:   "d",
					Exclusions:    []string{"192.0.2.9"},
					AvoidBuggyIps: true,
					Tenants:       []string{"acme"},
				},
				UpdateMask:   &fieldmaskpb.FieldMask{Paths: []string{"description", "exclusions", "avoid_buggy_ips", "tenants"}},
				RequestId:    "r",
				ValidateOnly: true,
			}},
		},
		{name: "nothing to update", args: []string{"web"}, wantErr: "nothing to update"},
		{name: "only an etag", args: []string{"web", "--etag", "e1"}, wantErr: "nothing to update"},
		{name: "bad label edit fails before reading", args: []string{"web", "--label", "=x"}, wantErr: "want KEY=VALUE or KEY-"},
		{
			name:    "unknown pool",
			args:    []string{"db", "--add-range", "198.51.100.0/24"},
			want:    []proto.Message{&ipamv1.GetPoolRequest{Name: "pools/db"}},
			wantErr: "pool pools/db not found",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.pools["pools/web"] = proto.Clone(current).(*ipamv1.Pool)
			res := runAt(t, f.start(t), append([]string{"pool", "update"}, tt.args...)...)
			checkRequests(t, f, res, tt.wantErr, tt.want)
		})
	}
}

func TestPoolCommands(t *testing.T) {
	f := newFake()
	addr := f.start(t)
	steps := []struct {
		args       []string
		wantStdout string
		wantErr    string
	}{
		{
			args: []string{"pool", "create", "web", "--range", "192.0.2.0/24", "--priority", "3"},
			wantStdout: `NAME        RANGES         AUTO   IPV4(USED/SIZE)   IPV6(USED/SIZE)   PRIORITY
pools/web   192.0.2.0/24   true   -                 -                 3
`,
		},
		{args: []string{"-o", "name", "pool", "create", "db", "--range", "198.51.100.0/24", "--no-auto-assign"}, wantStdout: "pools/db\n"},
		{args: []string{"pool", "create", "db", "--range", "198.51.100.0/24"}, wantErr: "pool pools/db already exists"},
		{
			args: []string{"pool", "get", "db", "-o", "json"},
			wantStdout: `{
  "name": "pools/db",
  "ranges": [
    "198.51.100.0/24"
  ],
  "autoAssign": false,
  "etag": "e1"
}
`,
		},
		{args: []string{"pool", "list", "-o", "name"}, wantStdout: "pools/db\npools/web\n"},
		{
			args: []string{"pool", "update", "db", "--auto-assign", "--add-range", "203.0.113.0/24"},
			wantStdout: `NAME       RANGES                           AUTO   IPV4(USED/SIZE)   IPV6(USED/SIZE)   PRIORITY
pools/db   198.51.100.0/24,203.0.113.0/24   true   -                 -                 -
`,
		},
		{args: []string{"pool", "delete", "db"}, wantStdout: "deleted pools/db\n"},
		{args: []string{"pool", "get", "db"}, wantErr: "pool pools/db not found"},
		{args: []string{"alloc", "allocate", "default/web", "--tenant", "acme", "--pool", "web", "-o", "name"}, wantStdout: "tenants/acme/allocations/a82b3ade9d00cd1642a4d\n"},
		{args: []string{"pool", "delete", "web"}, wantErr: "FailedPrecondition"},
		{args: []string{"pool", "delete", "web", "--force"}, wantStdout: "deleted pools/web, released 1 allocations\n"},
		{args: []string{"pool", "list", "-o", "json"}, wantStdout: "[]\n"},
	}
	for _, s := range steps {
		res := runAt(t, addr, s.args...)
		if s.wantErr != "" {
			if res.err == nil || !strings.Contains(output.FormatError(res.err), s.wantErr) {
				t.Errorf("%v: error %v, want one containing %q", s.args, res.err, s.wantErr)
			}
			continue
		}
		if res.err != nil {
			t.Errorf("%v: %v", s.args, res.err)
			continue
		}
		if diff := cmp.Diff(s.wantStdout, res.stdout); diff != "" {
			t.Errorf("%v: stdout (-want +got):\n%s", s.args, diff)
		}
	}
}
