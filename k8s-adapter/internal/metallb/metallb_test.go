package metallb

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func TestIDs(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{PoolID("c1", "metallb-system", "first-pool"), "c1-first-pool"},
		{PoolID("c1", "metallb-system", "Pool.With.Dots"), "c1-pool-with-dots-"},
		{PoolID("7c", "metallb-system", "x"), "p-7c-x-"},
		{ResourceID("metallb-system", "example"), "mlb-example"},
		{ResourceID("metallb-system", strings.Repeat("a", 80)), "mlb-" + strings.Repeat("a", 50)},
	}
	for _, tt := range tests {
		if !strings.HasPrefix(tt.got, tt.want) || !validID(tt.got) {
			t.Errorf("id %q: want a valid ID starting with %q", tt.got, tt.want)
		}
	}
	if PoolID("c1", "a", "Pool.X") == PoolID("c1", "b", "Pool.X") {
		t.Error("cleaned IDs of different namespaces collide")
	}
	if a, b := PoolID("c1", "ns", "Pool.X"), PoolID("c1", "ns", "Pool.X"); a != b {
		t.Error("IDs are not deterministic")
	}
}

// Specs are written as client-go's unstructured objects hold them: numbers
// as int64, lists as []any.
func TestPool(t *testing.T) {
	tests := []struct {
		name string
		o    Object
		want *ipamv1.Pool
		err  string
	}{
		{
			name: "MetalLB docs: first-pool",
			o: Object{Namespace: "metallb-system", Name: "first-pool", Spec: map[string]any{
				"addresses": []any{"198.51.100.0/24", "192.0.2.1-192.0.2.5", "2001:db8:e799::/124"},
			}},
			want: &ipamv1.Pool{
				Description: "MetalLB IPAddressPool metallb-system/first-pool of cluster c1",
				Ranges:      []string{"198.51.100.0/24", "192.0.2.1-192.0.2.5", "2001:db8:e799::/124"},
				Tenants:     []string{"c1"},
				Labels:      map[string]string{LabelTenant: "c1", LabelSource: SourceValue},
			},
		},
		{
			name: "every field",
			o: Object{Namespace: "metallb-system", Name: "prio", Labels: map[string]string{"zone": "a"}, Spec: map[string]any{
				"addresses":     []any{"198.51.100.200 - 198.51.100.209"},
				"autoAssign":    false,
				"avoidBuggyIPs": true,
				"serviceAllocation": map[string]any{
					"priority":           int64(50),
					"namespaces":         []any{"web"},
					"namespaceSelectors": []any{map[string]any{"matchLabels": map[string]any{"team": "a"}}},
					"serviceSelectors": []any{map[string]any{"matchExpressions": []any{
						map[string]any{"key": "app", "operator": "In", "values": []any{"x", "y"}},
					}}},
				},
			}},
			want: &ipamv1.Pool{
				Description:   "MetalLB IPAddressPool metallb-system/prio of cluster c1",
				Ranges:        []string{"198.51.100.200-198.51.100.209"},
				AutoAssign:    new(false),
				AvoidBuggyIps: true,
				Tenants:       []string{"c1"},
				Labels:        map[string]string{"zone": "a", LabelTenant: "c1", LabelSource: SourceValue},
				AllocationPolicy: &ipamv1.AllocationPolicy{
					Priority:           50,
					Namespaces:         []string{"web"},
					NamespaceSelectors: []*ipamv1.LabelSelector{{MatchLabels: map[string]string{"team": "a"}}},
					OwnerSelectors: []*ipamv1.LabelSelector{{MatchExpressions: []*ipamv1.LabelSelectorRequirement{
						{Key: "app", Operator: ipamv1.LabelSelectorRequirement_OPERATOR_IN, Values: []string{"x", "y"}},
					}}},
				},
			},
		},
		{name: "no addresses", o: Object{Spec: map[string]any{}}, err: "spec.addresses"},
		{name: "wrong types", o: Object{Spec: map[string]any{"addresses": "192.0.2.0/24", "autoAssign": "yes"}}, err: "spec.autoAssign: must be a boolean"},
		{name: "bad operator", o: Object{Spec: map[string]any{"addresses": []any{"192.0.2.0/24"}, "serviceAllocation": map[string]any{
			"serviceSelectors": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "a", "operator": "Near"}}}},
		}}}, err: "operator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Pool("c1", tt.o)
			if tt.err != "" {
				var se *SpecError
				if !errors.As(err, &se) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want a SpecError containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("pool (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnnouncementResources(t *testing.T) {
	ns := "metallb-system"
	l2, err := L2Advertisement("c1", Object{Namespace: ns, Name: "l2", Spec: map[string]any{
		"ipAddressPools":         []any{"first-pool"},
		"ipAddressPoolSelectors": []any{map[string]any{"matchLabels": map[string]any{"zone": "a"}}},
		"nodeSelectors":          []any{map[string]any{"matchLabels": map[string]any{"kubernetes.io/hostname": "n1"}}},
		"interfaces":             []any{"eth0"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&ipamv1.L2Advertisement{
		Pools:         []string{"pools/c1-first-pool"},
		PoolSelectors: []*ipamv1.LabelSelector{{MatchLabels: map[string]string{"zone": "a"}}},
		NodeSelectors: []*ipamv1.LabelSelector{{MatchLabels: map[string]string{"kubernetes.io/hostname": "n1"}}},
		Interfaces:    []string{"eth0"},
	}, l2, protocmp.Transform()); diff != "" {
		t.Errorf("L2Advertisement (-want +got):\n%s", diff)
	}

	bgp, err := BGPAdvertisement("c1", Object{Namespace: ns, Name: "local", Spec: map[string]any{
		"ipAddressPools":    []any{"bgp-pool"},
		"aggregationLength": int64(32),
		"localPref":         int64(100),
		"communities":       []any{"vpn-only", "65535:65282"},
		"peers":             []any{"router"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&ipamv1.BGPAdvertisement{
		Pools: []string{"pools/c1-bgp-pool"}, AggregationLength: 32, LocalPref: 100,
		Communities: []string{"vpn-only", "65535:65282"}, Peers: []string{"mlb-router"},
	}, bgp, protocmp.Transform()); diff != "" {
		t.Errorf("BGPAdvertisement (-want +got):\n%s", diff)
	}

	peer, unsupported, err := BGPPeer(Object{Namespace: ns, Name: "router", Spec: map[string]any{
		"myASN": int64(64500), "peerASN": int64(64501), "peerAddress": "203.0.113.201", "peerPort": int64(1179),
		"holdTime": "90s", "keepaliveTime": "30s", "bfdProfile": "full", "ebgpMultiHop": true,
		"passwordSecret": map[string]any{"name": "bgp-secret"}, "vrf": "red",
	}}, func(namespace, name string) (string, error) {
		if namespace != ns || name != "bgp-secret" {
			return "", errors.New("no such secret")
		}
		return "s3cret", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&ipamv1.BGPPeer{
		MyAsn: 64500, PeerAsn: 64501, PeerAddress: "203.0.113.201", PeerPort: 1179,
		HoldTime: durationpb.New(90 * time.Second), KeepaliveTime: durationpb.New(30 * time.Second),
		BfdProfile: "mlb-full", EbgpMultihop: true, Password: "s3cret",
	}, peer, protocmp.Transform()); diff != "" {
		t.Errorf("BGPPeer (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"spec.vrf"}, unsupported); diff != "" {
		t.Errorf("unsupported (-want +got):\n%s", diff)
	}
	if _, _, err := BGPPeer(Object{Spec: map[string]any{"password": "a", "passwordSecret": map[string]any{"name": "b"}}}, nil); err == nil {
		t.Error("password and passwordSecret together: no error")
	}

	bfd, err := BFDProfile(Object{Spec: map[string]any{
		"receiveInterval": int64(380), "transmitInterval": int64(270), "detectMultiplier": int64(37),
		"echoInterval": int64(62), "echoMode": true, "passiveMode": true, "minimumTtl": int64(10),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&ipamv1.BFDProfile{
		ReceiveInterval: durationpb.New(380 * time.Millisecond), TransmitInterval: durationpb.New(270 * time.Millisecond),
		DetectMultiplier: 37, EchoInterval: durationpb.New(62 * time.Millisecond), EchoMode: true, PassiveMode: true, MinimumTtl: 10,
	}, bfd, protocmp.Transform()); diff != "" {
		t.Errorf("BFDProfile (-want +got):\n%s", diff)
	}
	if _, err := BFDProfile(Object{Spec: map[string]any{"detectMultiplier": int64(1)}}); err == nil {
		t.Error("detectMultiplier 1: no error")
	}

	com, err := Community(Object{Spec: map[string]any{"communities": []any{map[string]any{"name": "vpn-only", "value": "1234:1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&ipamv1.Community{Aliases: []*ipamv1.CommunityAlias{{Name: "vpn-only", Value: "1234:1"}}}, com, protocmp.Transform()); diff != "" {
		t.Errorf("Community (-want +got):\n%s", diff)
	}
}

func TestPoolStatus(t *testing.T) {
	got := PoolStatus(&ipamv1.PoolStatus{Families: []*ipamv1.FamilyUsage{
		{Family: ipamv1.IPFamily_IP_FAMILY_IPV4, Size: "256", Used: 3, Free: "253"},
		{Family: ipamv1.IPFamily_IP_FAMILY_IPV6, Size: "18446744073709551616", Used: 1, Free: "18446744073709551615"},
	}})
	want := map[string]any{"assignedIPv4": int64(3), "availableIPv4": int64(253), "assignedIPv6": int64(1), "availableIPv6": int64(9223372036854775807)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}
