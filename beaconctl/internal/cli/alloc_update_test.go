package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func TestAllocUpdateRequests(t *testing.T) {
	seed := func(f *fakeIPAM) {
		f.allocs[webName] = &ipamv1.Allocation{
			Name: webName, Owner: "default/web", Addresses: []string{"192.0.2.7"}, Pool: "pools/web", Etag: "e1",
			OwnerLabels:     map[string]string{"app": "web", "legacy": "yes"},
			NamespaceLabels: map[string]string{"team": "net"},
		}
	}
	get := &ipamv1.GetAllocationRequest{Name: webName}
	update := func(a *ipamv1.Allocation, paths ...string) *ipamv1.UpdateAllocationRequest {
		a.Name = webName
		return &ipamv1.UpdateAllocationRequest{Allocation: a, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}
	}
	runConfigCases(t, seed, []configCase{
		{
			name: "traffic policy and endpoints need no read",
			args: []string{"alloc", "update", "default/web", "--tenant", "acme", "--endpoint-node", "node-1,node-2", "--traffic-policy", "Local"},
			want: []proto.Message{update(&ipamv1.Allocation{
				TrafficPolicy: ipamv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL,
				EndpointNodes: []string{"node-1", "node-2"},
			}, "traffic_policy", "endpoint_nodes")},
		},
		{
			name: "labels are edited with the etag read",
			args: []string{"alloc", "update", webName, "--label", "tier=edge", "--label", "legacy-", "--namespace-label", "team-"},
			want: []proto.Message{get, update(&ipamv1.Allocation{
				OwnerLabels:     map[string]string{"app": "web", "tier": "edge"},
				NamespaceLabels: map[string]string{},
				Etag:            "e1",
			}, "owner_labels", "namespace_labels")},
		},
		{
			name: "every flag, mask in field order",
			args: []string{
				"alloc", "update", "default/web", "--tenant", "acme", "--ttl", "2h", "--endpoint-node", "n1",
				"--traffic-policy", "cluster", "--port", "80/tcp,443", "--port", "53/udp", "--namespace-label", "x=y",
				"--label", "a=b", "--etag", "e1", "--request-id", "r",
			},
			want: []proto.Message{get, &ipamv1.UpdateAllocationRequest{
				Allocation: &ipamv1.Allocation{
					Name:            webName,
					OwnerLabels:     map[string]string{"app": "web", "legacy": "yes", "a": "b"},
					NamespaceLabels: map[string]string{"team": "net", "x": "y"},
					Ports: []*ipamv1.Port{
						{Port: 80, Protocol: ipamv1.Protocol_PROTOCOL_TCP},
						{Port: 443, Protocol: ipamv1.Protocol_PROTOCOL_TCP},
						{Port: 53, Protocol: ipamv1.Protocol_PROTOCOL_UDP},
					},
					TrafficPolicy: ipamv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
					EndpointNodes: []string{"n1"},
					Ttl:           durationpb.New(2 * time.Hour),
					Etag:          "e1",
				},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"owner_labels", "namespace_labels", "ports", "traffic_policy", "endpoint_nodes", "ttl"}},
				RequestId:  "r",
			}},
		},
		{
			name: "clear ports and endpoints, remove the TTL",
			args: []string{"alloc", "update", "default/web", "--tenant", "acme", "--port", "", "--endpoint-node", "", "--ttl", "0"},
			want: []proto.Message{update(&ipamv1.Allocation{}, "ports", "endpoint_nodes", "ttl")},
		},
		{
			name:    "stale etag",
			args:    []string{"alloc", "update", "default/web", "--tenant", "acme", "--ttl", "1h", "--etag", "e0"},
			want:    []proto.Message{update(&ipamv1.Allocation{Ttl: durationpb.New(time.Hour), Etag: "e0"}, "ttl")},
			wantErr: "Aborted",
		},
		{name: "nothing to update", args: []string{"alloc", "update", "default/web", "--tenant", "acme", "--etag", "e1"}, wantErr: "nothing to update"},
		{name: "bad traffic policy", args: []string{"alloc", "update", webName, "--traffic-policy", "nearest"}, wantErr: `--traffic-policy "nearest": want cluster or local`},
		{name: "bad port", args: []string{"alloc", "update", webName, "--port", "0"}, wantErr: `--port "0"`},
		{name: "negative ttl", args: []string{"alloc", "update", webName, "--ttl", "-1m"}, wantErr: "--ttl must not be negative"},
		{name: "bad label fails before reading", args: []string{"alloc", "update", webName, "--label", "x"}, wantErr: "want KEY=VALUE or KEY-"},
		{name: "owner without tenant", args: []string{"alloc", "update", "default/web", "--ttl", "1h"}, wantErr: "add --tenant"},
		{
			name:    "unknown owner",
			args:    []string{"alloc", "update", "default/db", "--tenant", "acme", "--label", "a=b"},
			want:    []proto.Message{&ipamv1.GetAllocationRequest{Name: fakeAllocationName("tenants/acme", "default/db")}},
			wantErr: "not found",
		},
	})
}

func TestAllocUpdateAndAnnouncedBy(t *testing.T) {
	f := newFake()
	f.allocs[webName] = &ipamv1.Allocation{
		Name: webName, Owner: "default/web", Addresses: []string{"192.0.2.7", "2001:db8::7"}, Pool: "pools/web", Etag: "e1",
		Announcements: []*ipamv1.AllocationAnnouncement{
			{Announcer: "tenants/acme/announcers/node-1", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2, Interfaces: []string{"eth0"}},
			{Announcer: "tenants/acme/announcers/node-2", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_BGP, Peers: []string{"tor1"}},
		},
	}
	addr := f.start(t)
	steps := []struct {
		args       []string
		wantStdout string
	}{
		{
			args: []string{"alloc", "get", "default/web", "--tenant", "acme"},
			wantStdout: `NAME                                             OWNER         ADDRESSES               POOL        EXPIRES   ANNOUNCED-BY
tenants/acme/allocations/a82b3ade9d00cd1642a4d   default/web   192.0.2.7,2001:db8::7   pools/web   -         node-1(L2),node-2(BGP)
`,
		},
		{
			args: []string{"alloc", "update", "default/web", "--tenant", "acme", "--traffic-policy", "local", "--endpoint-node", "node-2", "-o", "json"},
			wantStdout: `{
  "name": "tenants/acme/allocations/a82b3ade9d00cd1642a4d",
  "owner": "default/web",
  "trafficPolicy": "TRAFFIC_POLICY_LOCAL",
  "endpointNodes": [
    "node-2"
  ],
  "addresses": [
    "192.0.2.7",
    "2001:db8::7"
  ],
  "pool": "pools/web",
  "etag": "e1+",
  "announcements": [
    {
      "announcer": "tenants/acme/announcers/node-1",
      "protocol": "ANNOUNCEMENT_PROTOCOL_L2",
      "interfaces": [
        "eth0"
      ]
    },
    {
      "announcer": "tenants/acme/announcers/node-2",
      "protocol": "ANNOUNCEMENT_PROTOCOL_BGP",
      "peers": [
        "tor1"
      ]
    }
  ]
}
`,
		},
		{
			args: []string{"alloc", "update", webName, "--label", "tier=edge"},
			wantStdout: `NAME                                             OWNER         ADDRESSES               POOL        EXPIRES
tenants/acme/allocations/a82b3ade9d00cd1642a4d   default/web   192.0.2.7,2001:db8::7   pools/web   -
`,
		},
		{args: []string{"alloc", "get", webName, "-o", "name"}, wantStdout: webName + "\n"},
	}
	for _, s := range steps {
		res := runAt(t, addr, s.args...)
		if res.err != nil {
			t.Fatalf("%v: %s", s.args, output.FormatError(res.err))
		}
		if diff := cmp.Diff(s.wantStdout, res.stdout); diff != "" {
			t.Errorf("%v: stdout (-want +got):\n%s", s.args, diff)
		}
	}
	if got := f.allocs[webName].GetOwnerLabels(); !cmp.Equal(got, map[string]string{"tier": "edge"}) {
		t.Errorf("owner labels after update: %v", got)
	}
	if got := f.allocs[webName].GetEtag(); !strings.HasPrefix(got, "e1++") {
		t.Errorf("etag %q after two updates, want e1++", got)
	}
}
