package cli

import (
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
	// default/web anew for each case, with labels to edit.
	seed := func(e *testIPAM) {
		_, _ = ipamv1.NewAllocationServiceClient(e.conn).Release(e.ctx(), &ipamv1.ReleaseRequest{Name: webName})
		e.allocate("acme", "default/web", "web", func(a *ipamv1.Allocation) {
			a.OwnerLabels = map[string]string{"app": "web", "legacy": "yes"}
			a.NamespaceLabels = map[string]string{"team": "net"}
		})
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
			name:   "labels are edited with the etag read",
			args:   []string{"alloc", "update", webName, "--label", "tier=edge", "--label", "legacy-", "--namespace-label", "team-"},
			etagOf: webName,
			want: []proto.Message{get, update(&ipamv1.Allocation{
				OwnerLabels:     map[string]string{"app": "web", "tier": "edge"},
				NamespaceLabels: map[string]string{},
				Etag:            placeholder,
			}, "owner_labels", "namespace_labels")},
		},
		{
			name: "every flag, mask in field order",
			args: []string{
				"alloc", "update", "default/web", "--tenant", "acme", "--ttl", "2h", "--endpoint-node", "n1",
				"--traffic-policy", "cluster", "--port", "80/tcp,443", "--port", "53/udp", "--namespace-label", "x=y",
				"--label", "a=b", "--etag", placeholder, "--request-id", "r",
			},
			etagOf: webName,
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
					Etag:          placeholder,
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
		{name: "nothing to update", args: []string{"alloc", "update", "default/web", "--tenant", "acme", "--etag", "x"}, wantErr: "nothing to update"},
		{name: "bad traffic policy", args: []string{"alloc", "update", webName, "--traffic-policy", "nearest"}, wantErr: `--traffic-policy "nearest": want cluster or local`},
		{name: "bad port", args: []string{"alloc", "update", webName, "--port", "0"}, wantErr: `--port "0"`},
		{name: "negative ttl", args: []string{"alloc", "update", webName, "--ttl", "-1m"}, wantErr: "--ttl must not be negative"},
		{name: "bad label fails before reading", args: []string{"alloc", "update", webName, "--label", "x"}, wantErr: "want KEY=VALUE or KEY-"},
		{name: "owner without tenant", args: []string{"alloc", "update", "default/web", "--ttl", "1h"}, wantErr: "add --tenant"},
		{
			name:    "unknown owner",
			args:    []string{"alloc", "update", "default/db", "--tenant", "acme", "--label", "a=b"},
			want:    []proto.Message{&ipamv1.GetAllocationRequest{Name: allocationName("tenants/acme", "default/db")}},
			wantErr: "NotFound",
		},
	})
}

func TestAllocUpdateAndAnnouncedBy(t *testing.T) {
	ipam := newIPAM(t)
	ipam.pool("web", "198.51.100.0/28", "2001:db8::/120")
	ipam.allocate("acme", "default/web", "web", func(a *ipamv1.Allocation) {
		a.RequestedAddresses = []string{"198.51.100.7", "2001:db8::7"}
		a.IpFamilyPolicy = ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_REQUIRE_DUAL_STACK
	})
	// Two real announcer sessions report announcing its addresses.
	ipam.announce("acme", "node-1", nil, []*ipamv1.NetworkInterface{{Name: "eth0", HardwareAddress: "02:00:00:00:00:01", Up: true}},
		&ipamv1.AnnouncerStatus{Announced: []*ipamv1.AnnouncedAddress{
			{Address: "198.51.100.7", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2, Interfaces: []string{"eth0"}},
		}})
	ipam.announce("acme", "node-2", nil, nil, &ipamv1.AnnouncerStatus{Announced: []*ipamv1.AnnouncedAddress{
		{Address: "2001:db8::7/128", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_BGP, Peers: []string{"tor1"}},
	}})
	addr := ipam.addr
	steps := []struct {
		args       []string
		wantStdout string
	}{
		{
			args: []string{"alloc", "get", "default/web", "--tenant", "acme"},
			wantStdout: `NAME                                             OWNER         ADDRESSES                  POOL        EXPIRES   ANNOUNCED-BY
tenants/acme/allocations/a82b3ade9d00cd1642a4d   default/web   198.51.100.7,2001:db8::7   pools/web   -         node-1(L2 198.51.100.7),node-2(BGP 2001:db8::7/128)
`,
		},
		{
			args: []string{"alloc", "update", "default/web", "--tenant", "acme", "--traffic-policy", "local", "--endpoint-node", "node-2", "-o", "json"},
			// An update answers the allocation without who announces it
			// (get shows that).
			wantStdout: `{
  "name": "tenants/acme/allocations/a82b3ade9d00cd1642a4d",
  "uid": "UID",
  "owner": "default/web",
  "ipFamilyPolicy": "IP_FAMILY_POLICY_REQUIRE_DUAL_STACK",
  "requestedAddresses": [
    "198.51.100.7",
    "2001:db8::7"
  ],
  "requestedPool": "pools/web",
  "trafficPolicy": "TRAFFIC_POLICY_LOCAL",
  "endpointNodes": [
    "node-2"
  ],
  "addresses": [
    "198.51.100.7",
    "2001:db8::7"
  ],
  "pool": "pools/web",
  "etag": "ETAG",
  "createTime": "TIME",
  "updateTime": "TIME"
}
`,
		},
		{
			args: []string{"alloc", "update", webName, "--label", "tier=edge"},
			wantStdout: `NAME                                             OWNER         ADDRESSES                  POOL        EXPIRES
tenants/acme/allocations/a82b3ade9d00cd1642a4d   default/web   198.51.100.7,2001:db8::7   pools/web   -
`,
		},
		{args: []string{"alloc", "get", webName, "-o", "name"}, wantStdout: webName + "\n"},
	}
	for _, s := range steps {
		res := runAt(t, addr, s.args...)
		if res.err != nil {
			t.Fatalf("%v: %s", s.args, output.FormatError(res.err))
		}
		if diff := cmp.Diff(s.wantStdout, normalize(res.stdout)); diff != "" {
			t.Errorf("%v: stdout (-want +got):\n%s", s.args, diff)
		}
	}
	resp, err := ipamv1.NewAllocationServiceClient(ipam.conn).GetAllocation(ipam.ctx(), &ipamv1.GetAllocationRequest{Name: webName})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetAllocation().GetOwnerLabels(); !cmp.Equal(got, map[string]string{"tier": "edge"}) {
		t.Errorf("owner labels after update: %v", got)
	}
}
