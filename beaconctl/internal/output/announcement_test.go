package output

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func labels(kv ...string) *ipamv1.LabelSelector {
	s := &ipamv1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func TestSelector(t *testing.T) {
	tests := []struct {
		sel  *ipamv1.LabelSelector
		want string
	}{
		{sel: nil, want: "{}"},
		{sel: &ipamv1.LabelSelector{}, want: "{}"},
		{sel: labels("zone", "a", "role", "edge"), want: "{role=edge,zone=a}"},
		{sel: labels("empty", ""), want: "{empty=}"},
		{
			sel: &ipamv1.LabelSelector{
				MatchLabels: map[string]string{"app": "web"},
				MatchExpressions: []*ipamv1.LabelSelectorRequirement{
					{Key: "zone", Operator: ipamv1.LabelSelectorRequirement_OPERATOR_IN, Values: []string{"a", "b"}},
					{Key: "tier", Operator: ipamv1.LabelSelectorRequirement_OPERATOR_NOT_IN, Values: []string{"test"}},
					{Key: "edge", Operator: ipamv1.LabelSelectorRequirement_OPERATOR_EXISTS},
					{Key: "legacy", Operator: ipamv1.LabelSelectorRequirement_OPERATOR_DOES_NOT_EXIST},
				},
			},
			want: "{app=web,zone in (a,b),tier notin (test),edge,!legacy}",
		},
	}
	for _, tt := range tests {
		if got := Selector(tt.sel); got != tt.want {
			t.Errorf("Selector(%v) = %q, want %q", tt.sel, got, tt.want)
		}
	}
}

func TestConditions(t *testing.T) {
	conds := []*ipamv1.Condition{
		{Type: "Valid", Status: true, Reason: "Ok"},
		{Type: "Announced", Status: false, Reason: "NoCommonNode", Message: "no node is selected by both"},
		{Type: "Resolved", Status: false},
	}
	if got, want := Conditions(conds), "NoCommonNode,Resolved=False"; got != want {
		t.Errorf("Conditions = %q, want %q", got, want)
	}
	if got := Conditions(conds[:1]); got != "" {
		t.Errorf("Conditions of holding ones = %q, want empty", got)
	}
}

func TestAnnouncementTables(t *testing.T) {
	tests := []struct {
		name  string
		write func(*bytes.Buffer) error
		want  string
	}{
		{
			name: "l2 advertisements",
			write: func(b *bytes.Buffer) error {
				return L2AdvertisementTable(b, []*ipamv1.L2Advertisement{
					{
						Name:          "tenants/acme/l2Advertisements/prod",
						Pools:         []string{"pools/web", "pools/db"},
						PoolSelectors: []*ipamv1.LabelSelector{labels("env", "prod")},
						NodeSelectors: []*ipamv1.LabelSelector{labels("zone", "a", "role", "edge"), labels("zone", "b")},
						Interfaces:    []string{"eth0", "eth1"},
						NodePriorities: []*ipamv1.NodePriority{
							{Priority: 1, NodeSelector: labels("rack", "r1")},
							{Priority: 2, NodeSelector: &ipamv1.LabelSelector{}},
						},
						Conditions: []*ipamv1.Condition{{Type: "Announced", Reason: "NoCommonNode"}},
					},
					{Name: "tenants/acme/l2Advertisements/all"},
				})
			},
			want: `NAME                                 POOLS                           NODE-SELECTORS                INTERFACES   PRIORITIES         CONDITIONS
tenants/acme/l2Advertisements/prod   pools/web,pools/db,{env=prod}   {role=edge,zone=a},{zone=b}   eth0,eth1    1:{rack=r1},2:{}   NoCommonNode
tenants/acme/l2Advertisements/all    *                               *                             *            -                  -
`,
		},
		{
			name:  "no l2 advertisements",
			write: func(b *bytes.Buffer) error { return L2AdvertisementTable(b, nil) },
			want:  "NAME   POOLS   NODE-SELECTORS   INTERFACES   PRIORITIES   CONDITIONS\n",
		},
		{
			name: "bgp advertisements",
			write: func(b *bytes.Buffer) error {
				return BGPAdvertisementTable(b, []*ipamv1.BGPAdvertisement{
					{
						Name:                "tenants/acme/bgpAdvertisements/prod",
						PoolSelectors:       []*ipamv1.LabelSelector{labels("env", "prod")},
						Peers:               []string{"tor1", "tor2"},
						Communities:         []string{"65000:100", "large:65000:1:2", "no-advertise"},
						LocalPref:           200,
						AggregationLength:   24,
						AggregationLengthV6: 64,
						Conditions: []*ipamv1.Condition{
							{Type: "Announced", Reason: "NoMatchingNode"},
							{Type: "Peers", Status: true, Reason: "Found"},
						},
					},
					{Name: "tenants/acme/bgpAdvertisements/web", Pools: []string{"pools/web"}},
				})
			},
			want: `NAME                                  POOLS        PEERS       COMMUNITIES                              LOCAL-PREF   AGG      CONDITIONS
tenants/acme/bgpAdvertisements/prod   {env=prod}   tor1,tor2   65000:100,large:65000:1:2,no-advertise   200          24/64    NoMatchingNode
tenants/acme/bgpAdvertisements/web    pools/web    *           -                                        -            32/128   -
`,
		},
		{
			name: "bgp peers",
			write: func(b *bytes.Buffer) error {
				return BGPPeerTable(b, []*ipamv1.BGPPeer{
					{Name: "tenants/acme/bgpPeers/tor1", MyAsn: 64512, PeerAsn: 64500, PeerAddress: "192.0.2.1", PeerPort: 179, BfdProfile: "fast"},
					{
						Name: "tenants/acme/bgpPeers/tor6", MyAsn: 4200000000, PeerAsn: 64500, PeerAddress: "2001:db8::1", PeerPort: 1179,
						NodeSelectors: []*ipamv1.LabelSelector{labels("rack", "r1")},
						Conditions:    []*ipamv1.Condition{{Type: "Selected", Reason: "NoMatchingNode"}},
					},
					{Name: "tenants/lab/bgpPeers/new"},
				})
			},
			want: `NAME                         MY-ASN       PEER-ASN   ADDRESS              BFD    NODE-SELECTORS   CONDITIONS
tenants/acme/bgpPeers/tor1   64512        64500      192.0.2.1            fast   *                -
tenants/acme/bgpPeers/tor6   4200000000   64500      [2001:db8::1]:1179   -      {rack=r1}        NoMatchingNode
tenants/lab/bgpPeers/new     -            -          -                    -      *                -
`,
		},
		{
			name: "bfd profiles",
			write: func(b *bytes.Buffer) error {
				return BFDProfileTable(b, []*ipamv1.BFDProfile{
					{Name: "tenants/acme/bfdProfiles/fast", ReceiveInterval: durationpb.New(50 * time.Millisecond), TransmitInterval: durationpb.New(1500 * time.Millisecond), DetectMultiplier: 5},
					{Name: "tenants/acme/bfdProfiles/default"},
				})
			},
			want: `NAME                               RX      TX      MULT
tenants/acme/bfdProfiles/fast      50ms    1.5s    5
tenants/acme/bfdProfiles/default   300ms   300ms   3
`,
		},
		{
			name: "communities",
			write: func(b *bytes.Buffer) error {
				return CommunityTable(b, []*ipamv1.Community{
					{Name: "tenants/acme/communities/tags", Aliases: []*ipamv1.CommunityAlias{
						{Name: "no-advertise", Value: "65535:65282"},
						{Name: "prod", Value: "large:64512:1:1"},
					}},
					{Name: "tenants/acme/communities/empty"},
				})
			},
			want: `NAME                             ALIASES
tenants/acme/communities/tags    no-advertise=65535:65282,prod=large:64512:1:1
tenants/acme/communities/empty   -
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

func testAnnouncer() *ipamv1.Announcer {
	return &ipamv1.Announcer{
		Name:   "tenants/acme/announcers/node-1",
		Labels: map[string]string{"zone": "a", "kubernetes.io/hostname": "node-1"},
		Interfaces: []*ipamv1.NetworkInterface{
			{Name: "eth0", HardwareAddress: "02:00:00:00:00:01", Addresses: []string{"192.0.2.10/24", "2001:db8::10/64"}, Up: true},
			{Name: "eth1", HardwareAddress: "02:00:00:00:00:02"},
		},
		Status: &ipamv1.AnnouncerStatus{
			Announced: []*ipamv1.AnnouncedAddress{
				{Address: "192.0.2.7", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2, Interfaces: []string{"eth0"}},
				{Address: "198.51.100.0/24", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_BGP, Peers: []string{"tenants/acme/bgpPeers/tor1", "tenants/acme/bgpPeers/tor2"}},
			},
			Sessions: []*ipamv1.BGPSessionStatus{
				{Peer: "tenants/acme/bgpPeers/tor1", State: ipamv1.BGPSessionStatus_STATE_ESTABLISHED, BfdUp: true, Since: timestamppb.New(t0), AdvertisedPrefixes: 1},
				{Peer: "tenants/acme/bgpPeers/tor2", State: ipamv1.BGPSessionStatus_STATE_ACTIVE},
			},
		},
		Live:        true,
		ConnectTime: timestamppb.New(t0.Add(-time.Hour)),
	}
}

func TestAnnouncerOutput(t *testing.T) {
	tests := []struct {
		name  string
		write func(*bytes.Buffer) error
		want  string
	}{
		{
			name: "table",
			write: func(b *bytes.Buffer) error {
				return AnnouncerTable(b, []*ipamv1.Announcer{
					testAnnouncer(),
					{Name: "tenants/acme/announcers/node-2", Draining: true},
				})
			},
			want: `NAME                             LIVE    DRAINING   INTERFACES        ANNOUNCED   SESSIONS
tenants/acme/announcers/node-1   true    false      eth0,eth1(down)   2           1/2
tenants/acme/announcers/node-2   false   true       -                 0           -
`,
		},
		{
			name:  "details",
			write: func(b *bytes.Buffer) error { return AnnouncerDetails(b, testAnnouncer()) },
			want: `Name:        tenants/acme/announcers/node-1
Live:        true
Connected:   2026-03-04T04:06:07Z
Draining:    false
Excluded:    false
Labels:      kubernetes.io/hostname=node-1,zone=a

Interfaces:
  NAME   STATE   MAC                 ADDRESSES
  eth0   up      02:00:00:00:00:01   192.0.2.10/24,2001:db8::10/64
  eth1   down    02:00:00:00:00:02   -

Announced:
  ADDRESS           PROTOCOL   INTERFACES/PEERS
  192.0.2.7         L2         eth0
  198.51.100.0/24   BGP        tenants/acme/bgpPeers/tor1,tenants/acme/bgpPeers/tor2

BGP sessions:
  PEER                         STATE         BFD   SINCE                  PREFIXES
  tenants/acme/bgpPeers/tor1   ESTABLISHED   up    2026-03-04T05:06:07Z   1
  tenants/acme/bgpPeers/tor2   ACTIVE        -     -                      0
`,
		},
		{
			name: "details with a conflict",
			write: func(b *bytes.Buffer) error {
				return AnnouncerDetails(b, &ipamv1.Announcer{Name: "tenants/acme/announcers/node-3", Live: true, Status: &ipamv1.AnnouncerStatus{
					Conflicts: []*ipamv1.AddressConflict{{Address: "198.51.100.7", Interface: "eth0", HardwareAddress: "02:00:00:00:00:09", BeforeAnswering: true}},
				}})
			},
			want: `Name:        tenants/acme/announcers/node-3
Live:        true
Connected:   -
Draining:    false
Excluded:    false
Labels:      -

Interfaces: none

Announced: none

BGP sessions: none

Conflicts:
  ADDRESS        INTERFACE   OTHER-MAC           FOUND-BY   SINCE
  198.51.100.7   eth0        02:00:00:00:00:09   probe      -
`,
		},
		{
			name: "details of a drained node that is away",
			write: func(b *bytes.Buffer) error {
				return AnnouncerDetails(b, &ipamv1.Announcer{Name: "tenants/acme/announcers/node-2", Draining: true})
			},
			want: `Name:        tenants/acme/announcers/node-2
Live:        false
Connected:   -
Draining:    true
Excluded:    false
Labels:      -

Interfaces: none

Announced: none

BGP sessions: none
`,
		},
		{
			name: "allocation with announcements",
			write: func(b *bytes.Buffer) error {
				return AllocationDetailTable(b, []*ipamv1.Allocation{
					{
						Name: "tenants/acme/allocations/a1", Owner: "default/web", Addresses: []string{"192.0.2.7"}, Pool: "pools/web",
						Announcements: []*ipamv1.AllocationAnnouncement{
							{Announcer: "tenants/acme/announcers/node-1", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2, Interfaces: []string{"eth0"}},
							{Announcer: "tenants/acme/announcers/node-2", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_BGP, Peers: []string{"tor1"}},
						},
					},
					{Name: "tenants/acme/allocations/a2", Owner: "default/db", Addresses: []string{"192.0.2.8"}, Pool: "pools/web"},
				})
			},
			want: `NAME                          OWNER         ADDRESSES   POOL        EXPIRES   ANNOUNCED-BY
tenants/acme/allocations/a1   default/web   192.0.2.7   pools/web   -         node-1(L2),node-2(BGP)
tenants/acme/allocations/a2   default/db    192.0.2.8   pools/web   -         -
`,
		},
		{
			name: "allocation with several addresses, each on its node",
			write: func(b *bytes.Buffer) error {
				return AllocationDetailTable(b, []*ipamv1.Allocation{{
					Name: "tenants/acme/allocations/a1", Owner: "default/web", Addresses: []string{"198.51.100.1", "198.51.100.2"}, Pool: "pools/web",
					Announcements: []*ipamv1.AllocationAnnouncement{
						{Announcer: "tenants/acme/announcers/node-1", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2, Address: "198.51.100.1"},
						{Announcer: "tenants/acme/announcers/node-2", Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2, Address: "198.51.100.2"},
					},
				}})
			},
			want: `NAME                          OWNER         ADDRESSES                   POOL        EXPIRES   ANNOUNCED-BY
tenants/acme/allocations/a1   default/web   198.51.100.1,198.51.100.2   pools/web   -         node-1(L2 198.51.100.1),node-2(L2 198.51.100.2)
`,
		},
		{
			name: "allocation with a conflict",
			write: func(b *bytes.Buffer) error {
				return AllocationDetailTable(b, []*ipamv1.Allocation{{
					Name: "tenants/acme/allocations/a1", Owner: "default/web", Addresses: []string{"198.51.100.7"}, Pool: "pools/web",
					Conditions: []*ipamv1.AllocationCondition{{
						Type: "Conflict", Address: "198.51.100.7", Announcer: "tenants/acme/announcers/node-1", Interface: "eth0",
						HardwareAddress: "02:00:00:00:00:09", Message: "another host uses it",
					}},
				}})
			},
			want: `NAME                          OWNER         ADDRESSES      POOL        EXPIRES   ANNOUNCED-BY
tenants/acme/allocations/a1   default/web   198.51.100.7   pools/web   -         -
Conflict: default/web 198.51.100.7 on node-1/eth0, MAC 02:00:00:00:00:09: another host uses it
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
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}
