package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// checkRequests compares what the recorder relayed to the IPAM with want,
// or checks that the run failed with an error containing wantErr (and then
// that it sent want, usually nothing).
func checkRequests(t *testing.T, f *recorder, res result, wantErr string, want []proto.Message) {
	t.Helper()
	switch {
	case wantErr == "" && res.err != nil:
		t.Fatalf("unexpected error: %v\nstderr: %s", res.err, res.stderr)
	case wantErr != "" && res.err == nil:
		t.Fatalf("no error, want one containing %q", wantErr)
	case wantErr != "" && !strings.Contains(res.err.Error(), wantErr):
		t.Fatalf("error %q does not contain %q", res.err, wantErr)
	}
	if diff := cmp.Diff(want, f.recorded(), protocmp.Transform(), cmpopts.EquateEmpty()); diff != "" {
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
			args: []string{"web", "--range", "198.51.100.0/28"},
			want: &ipamv1.CreatePoolRequest{PoolId: "web", Pool: &ipamv1.Pool{Ranges: []string{"198.51.100.0/28"}}},
		},
		{
			name: "full name and comma-separated ranges",
			args: []string{"pools/web2", "--range", "198.51.100.16/28,2001:db8:2::/64", "--range", "198.51.100.40-198.51.100.47"},
			want: &ipamv1.CreatePoolRequest{PoolId: "web2", Pool: &ipamv1.Pool{
				Ranges: []string{"198.51.100.16/28", "2001:db8:2::/64", "198.51.100.40-198.51.100.47"},
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
			// The flag keeps the comma; the IPAM refuses it in a label.
			wantErr: "pool.labels[note]",
		},
		{
			name: "namespace alone makes a policy",
			args: []string{"web3", "--range", "198.51.100.64/28", "--namespace", "default"},
			want: &ipamv1.CreatePoolRequest{PoolId: "web3", Pool: &ipamv1.Pool{
				Ranges:           []string{"198.51.100.64/28"},
				AllocationPolicy: &ipamv1.AllocationPolicy{Namespaces: []string{"default"}},
			}},
		},
		{name: "no range", args: []string{"web"}, wantErr: "at least one --range"},
		{name: "bad label", args: []string{"web", "--range", "198.51.100.0/24", "--label", "env"}, wantErr: `--label "env": want KEY=VALUE`},
		{name: "bad name", args: []string{"a/b", "--range", "198.51.100.0/24"}, wantErr: `invalid pool name "a/b"`},
		{name: "negative priority", args: []string{"web", "--range", "198.51.100.0/24", "--priority", "-1"}, wantErr: "--priority"},
		{name: "missing name", args: []string{"--range", "198.51.100.0/24"}, wantErr: "missing NAME"},
		{name: "unknown flag", args: []string{"web", "--ranges", "198.51.100.0/24"}, wantErr: "unknown flag: --ranges"},
	}
	ipam := newIPAM(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, addr := ipam.record(t)
			res := runAt(t, addr, append([]string{"pool", "create"}, tt.args...)...)
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
		Ranges:     []string{"203.0.113.0/24", "2001:db8::/64"},
		Exclusions: []string{"203.0.113.1"},
		Labels:     map[string]string{"env": "dev", "team": "net"},
	}
	get := &ipamv1.GetPoolRequest{Name: "pools/web"}
	update := func(p *ipamv1.Pool, paths ...string) *ipamv1.UpdatePoolRequest {
		p.Name = "pools/web"
		return &ipamv1.UpdatePoolRequest{Pool: p, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}
	}
	tests := []struct {
		name string
		// args: ETAG stands for the pool's etag.
		args    []string
		want    []proto.Message
		wantErr string
	}{
		{
			name: "add range reads the pool and sends its etag",
			args: []string{"web", "--add-range", "198.51.100.0/24"},
			want: []proto.Message{get, update(&ipamv1.Pool{
				Ranges: []string{"203.0.113.0/24", "2001:db8::/64", "198.51.100.0/24"},
				Etag:   placeholder,
			}, "ranges")},
		},
		{
			name: "remove and add, matching ranges by value",
			args: []string{"pools/web", "--remove-range", "2001:DB8::/64", "--add-range", "203.0.113.0/24,2001:db8:1::/64"},
			want: []proto.Message{get, update(&ipamv1.Pool{
				Ranges: []string{"203.0.113.0/24", "2001:db8:1::/64"},
				Etag:   placeholder,
			}, "ranges")},
		},
		{
			name:    "remove a range the pool lacks",
			args:    []string{"web", "--remove-range", "2001:db8:9::/64"},
			want:    []proto.Message{get},
			wantErr: "the pool has no such range",
		},
		{
			name: "set exclusions needs no read",
			args: []string{"web", "--set-exclusions", "203.0.113.1,203.0.113.254"},
			want: []proto.Message{update(&ipamv1.Pool{Exclusions: []string{"203.0.113.1", "203.0.113.254"}}, "exclusions")},
		},
		{
			name: "clear exclusions",
			args: []string{"web", "--set-exclusions", ""},
			want: []proto.Message{update(&ipamv1.Pool{}, "exclusions")},
		},
		{
			name: "auto-assign off with an etag",
			args: []string{"web", "--auto-assign=false", "--etag", placeholder},
			want: []proto.Message{update(&ipamv1.Pool{AutoAssign: proto.Bool(false), Etag: placeholder}, "auto_assign")},
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
				Etag:   placeholder,
			}, "labels")},
		},
		{
			name: "the user's etag wins over the one read",
			args: []string{"web", "--add-range", "198.51.100.0/24", "--etag", "e0"},
			want: []proto.Message{get, update(&ipamv1.Pool{
				Ranges: []string{"203.0.113.0/24", "2001:db8::/64", "198.51.100.0/24"},
				Etag:   "e0",
			}, "ranges")},
			wantErr: "Aborted",
		},
		{
			name: "mask in field order",
			args: []string{"web", "--set-tenants", "acme", "--description", "d", "--avoid-buggy-ips", "--set-exclusions", "203.0.113.9", "--request-id", "r", "--validate-only"},
			want: []proto.Message{&ipamv1.UpdatePoolRequest{
				Pool: &ipamv1.Pool{
					Name:          "pools/web",
					Description:   "d",
					Exclusions:    []string{"203.0.113.9"},
					AvoidBuggyIps: true,
					Tenants:       []string{"acme"},
				},
				UpdateMask:   &fieldmaskpb.FieldMask{Paths: []string{"description", "exclusions", "avoid_buggy_ips", "tenants"}},
				RequestId:    "r",
				ValidateOnly: true,
			}},
		},
		{name: "nothing to update", args: []string{"web"}, wantErr: "nothing to update"},
		{name: "only an etag", args: []string{"web", "--etag", placeholder}, wantErr: "nothing to update"},
		{name: "bad label edit fails before reading", args: []string{"web", "--label", "=x"}, wantErr: "want KEY=VALUE or KEY-"},
		{
			name:    "unknown pool",
			args:    []string{"db", "--add-range", "198.51.100.0/24"},
			want:    []proto.Message{&ipamv1.GetPoolRequest{Name: "pools/db"}},
			wantErr: "NotFound",
		},
	}
	ipam := newIPAM(t)
	pools := ipamv1.NewPoolServiceClient(ipam.conn)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The same pool for every case, made anew.
			_, _ = pools.DeletePool(ipam.ctx(), &ipamv1.DeletePoolRequest{Name: "pools/web", Force: true})
			created, err := pools.CreatePool(ipam.ctx(), &ipamv1.CreatePoolRequest{PoolId: "web", Pool: current})
			if err != nil {
				t.Fatalf("setup: %v", err)
			}
			etag := created.GetPool().GetEtag()
			args, want := fill(tt.args, tt.want, etag)
			f, addr := ipam.record(t)
			res := runAt(t, addr, append([]string{"pool", "update"}, args...)...)
			checkRequests(t, f, res, tt.wantErr, want)
		})
	}
}

func TestPoolCommands(t *testing.T) {
	addr := newIPAM(t).addr
	steps := []struct {
		args       []string
		wantStdout string
		wantErr    string
	}{
		{
			args: []string{"pool", "create", "web", "--range", "203.0.113.0/28", "--priority", "3"},
			wantStdout: `NAME        RANGES           AUTO   IPV4(USED/SIZE)   IPV6(USED/SIZE)   PRIORITY
pools/web   203.0.113.0/28   true   0/16              -                 3
`,
		},
		{args: []string{"-o", "name", "pool", "create", "db", "--range", "198.51.100.0/28", "--no-auto-assign"}, wantStdout: "pools/db\n"},
		{args: []string{"pool", "create", "db", "--range", "198.51.100.0/28"}, wantErr: "AlreadyExists"},
		{
			args: []string{"pool", "get", "db", "-o", "json"},
			wantStdout: `{
  "name": "pools/db",
  "uid": "UID",
  "ranges": [
    "198.51.100.0/28"
  ],
  "autoAssign": false,
  "status": {
    "families": [
      {
        "family": "IP_FAMILY_IPV4",
        "size": "16",
        "free": "16"
      }
    ]
  },
  "etag": "ETAG",
  "createTime": "TIME",
  "updateTime": "TIME"
}
`,
		},
		{args: []string{"pool", "list", "-o", "name"}, wantStdout: "pools/db\npools/web\n"},
		{
			args: []string{"pool", "update", "db", "--auto-assign", "--add-range", "203.0.113.128/28"},
			wantStdout: `NAME       RANGES                             AUTO   IPV4(USED/SIZE)   IPV6(USED/SIZE)   PRIORITY
pools/db   198.51.100.0/28,203.0.113.128/28   true   0/32              -                 -
`,
		},
		{args: []string{"pool", "delete", "db"}, wantStdout: "deleted pools/db\n"},
		{args: []string{"pool", "get", "db"}, wantErr: "NotFound"},
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
		if diff := cmp.Diff(s.wantStdout, normalize(res.stdout)); diff != "" {
			t.Errorf("%v: stdout (-want +got):\n%s", s.args, diff)
		}
	}
}
