package request

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func TestFilterWants(t *testing.T) {
	lb := func(class string) *Service { return &Service{Type: "LoadBalancer", Class: class} }
	tests := []struct {
		name string
		f    Filter
		s    *Service
		want bool
	}{
		{"our class", Filter{Class: "beacon.io/lb"}, lb("beacon.io/lb"), true},
		{"other class", Filter{Class: "beacon.io/lb", AlsoUnclassed: true}, lb("other.io/lb"), false},
		{"unclassed taken", Filter{Class: "beacon.io/lb", AlsoUnclassed: true}, lb(""), true},
		{"unclassed left", Filter{Class: "beacon.io/lb"}, lb(""), false},
		{"not a load balancer", Filter{Class: "beacon.io/lb", AlsoUnclassed: true}, &Service{Type: "ClusterIP"}, false},
		{"deleting", Filter{Class: "beacon.io/lb", AlsoUnclassed: true}, &Service{Type: "LoadBalancer", Deleting: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f.Wants(tt.s); got != tt.want {
				t.Fatalf("Wants = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	base := func(mod func(*Service)) *Service {
		s := &Service{
			Namespace: "web", Name: "front", UID: "u1", Type: "LoadBalancer",
			Labels:         map[string]string{"app": "front"},
			IPFamilies:     []string{"IPv4"},
			IPFamilyPolicy: "SingleStack",
			Ports:          []Port{{Port: 443, Protocol: "TCP"}, {Port: 80}, {Port: 443, Protocol: "TCP"}, {Port: 53, Protocol: "UDP"}},
		}
		if mod != nil {
			mod(s)
		}
		return s
	}
	want := func(mod func(*ipamv1.Allocation)) *ipamv1.Allocation {
		a := &ipamv1.Allocation{
			Owner: "web/front", OwnerUid: "u1", Namespace: "web",
			OwnerLabels:     map[string]string{"app": "front"},
			NamespaceLabels: map[string]string{"team": "a"},
			IpFamilies:      []ipamv1.IPFamily{ipamv1.IPFamily_IP_FAMILY_IPV4},
			IpFamilyPolicy:  ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_SINGLE_STACK,
			Ports: []*ipamv1.Port{
				{Port: 53, Protocol: ipamv1.Protocol_PROTOCOL_UDP},
				{Port: 80, Protocol: ipamv1.Protocol_PROTOCOL_TCP},
				{Port: 443, Protocol: ipamv1.Protocol_PROTOCOL_TCP},
			},
			TrafficPolicy: ipamv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		}
		if mod != nil {
			mod(a)
		}
		return a
	}
	opts := Options{
		NamespaceLabels: map[string]string{"team": "a"},
		EndpointNodes:   []string{"n2", "n1", "n2"},
		MetalLBPool:     func(name string) string { return "c1-" + name },
	}
	ann := func(kv ...string) func(*Service) {
		return func(s *Service) {
			s.Annotations = map[string]string{}
			for i := 0; i < len(kv); i += 2 {
				s.Annotations[kv[i]] = kv[i+1]
			}
		}
	}
	tests := []struct {
		name      string
		svc       *Service
		want      *ipamv1.Allocation
		warnings  []string // reasons
		errReason string
	}{
		{name: "plain", svc: base(nil), want: want(nil)},
		{
			name: "metallb annotations",
			svc:  base(ann("metallb.io/loadBalancerIPs", "192.0.2.10", "metallb.io/address-pool", "prod", "metallb.io/allow-shared-ip", "k1")),
			want: want(func(a *ipamv1.Allocation) {
				a.RequestedAddresses = []string{"192.0.2.10"}
				a.RequestedPool = "pools/c1-prod"
				a.SharingKey = "k1"
			}),
		},
		{
			name: "beacon annotations name IPAM pools directly",
			svc:  base(ann("beacon.io/address-pool", "prod", "beacon.io/allow-shared-ip", "k2")),
			want: want(func(a *ipamv1.Allocation) {
				a.RequestedPool = "pools/prod"
				a.SharingKey = "k2"
			}),
		},
		{
			name: "deprecated prefix warns",
			svc:  base(ann("metallb.universe.tf/address-pool", "old")),
			want: want(func(a *ipamv1.Allocation) {
				a.RequestedPool = "pools/c1-old"
			}),
			warnings: []string{"DeprecatedAnnotation"},
		},
		{
			name: "conflict: beacon wins",
			svc:  base(ann("beacon.io/allow-shared-ip", "a", "metallb.io/allow-shared-ip", "b")),
			want: want(func(a *ipamv1.Allocation) {
				a.SharingKey = "a"
			}),
			warnings: []string{"ConflictingAnnotations"},
		},
		{
			name: "spec.loadBalancerIP",
			svc:  base(func(s *Service) { s.LoadBalancerIP = "192.0.2.7" }),
			want: want(func(a *ipamv1.Allocation) { a.RequestedAddresses = []string{"192.0.2.7"} }),
		},
		{
			name: "dual-stack requested",
			svc: base(func(s *Service) {
				s.IPFamilies, s.IPFamilyPolicy = []string{"IPv6", "IPv4"}, "RequireDualStack"
				ann("metallb.io/loadBalancerIPs", "2001:db8::5, 192.0.2.5")(s)
			}),
			want: want(func(a *ipamv1.Allocation) {
				a.IpFamilies = []ipamv1.IPFamily{ipamv1.IPFamily_IP_FAMILY_IPV6, ipamv1.IPFamily_IP_FAMILY_IPV4}
				a.IpFamilyPolicy = ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_REQUIRE_DUAL_STACK
				a.RequestedAddresses = []string{"2001:db8::5", "192.0.2.5"}
			}),
		},
		{
			name: "prefer dual-stack",
			svc:  base(func(s *Service) { s.IPFamilies, s.IPFamilyPolicy = []string{"IPv4", "IPv6"}, "PreferDualStack" }),
			want: want(func(a *ipamv1.Allocation) {
				a.IpFamilies = []ipamv1.IPFamily{ipamv1.IPFamily_IP_FAMILY_IPV4, ipamv1.IPFamily_IP_FAMILY_IPV6}
				a.IpFamilyPolicy = ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_PREFER_DUAL_STACK
			}),
		},
		{
			name: "local traffic policy sends endpoint nodes",
			svc:  base(func(s *Service) { s.ExternalTrafficPolicy = "Local" }),
			want: want(func(a *ipamv1.Allocation) {
				a.TrafficPolicy = ipamv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
				a.EndpointNodes = []string{"n1", "n2"}
			}),
		},
		{name: "both loadBalancerIP and annotation", svc: base(func(s *Service) {
			s.LoadBalancerIP = "192.0.2.7"
			ann("metallb.io/loadBalancerIPs", "192.0.2.8")(s)
		}), errReason: "InvalidAnnotation"},
		{
			name: "global group: cluster policy still reports endpoint nodes",
			svc:  base(ann("beacon.io/global-group", "anycast/web")),
			want: want(func(a *ipamv1.Allocation) {
				a.GlobalGroup = "pools/anycast/globalGroups/web"
				a.GlobalRole = ipamv1.GlobalRole_GLOBAL_ROLE_ACTIVE
				a.EndpointNodes = []string{"n1", "n2"}
			}),
		},
		{
			name: "global group by resource name, backup",
			svc:  base(ann("beacon.io/global-group", "pools/anycast/globalGroups/web", "beacon.io/global-role", "backup")),
			want: want(func(a *ipamv1.Allocation) {
				a.GlobalGroup = "pools/anycast/globalGroups/web"
				a.GlobalRole = ipamv1.GlobalRole_GLOBAL_ROLE_BACKUP
				a.EndpointNodes = []string{"n1", "n2"}
			}),
		},
		{
			name: "global group in the address-pool annotation's pool",
			svc:  base(ann("beacon.io/global-group", "web", "beacon.io/address-pool", "anycast")),
			want: want(func(a *ipamv1.Allocation) {
				a.RequestedPool = "pools/anycast"
				a.GlobalGroup = "pools/anycast/globalGroups/web"
				a.GlobalRole = ipamv1.GlobalRole_GLOBAL_ROLE_ACTIVE
				a.EndpointNodes = []string{"n1", "n2"}
			}),
		},
		{name: "global group without a pool", svc: base(ann("beacon.io/global-group", "web")), errReason: "InvalidAnnotation"},
		{name: "global group with an address", svc: base(ann("beacon.io/global-group", "a/web", "beacon.io/loadBalancerIPs", "192.0.2.1")), errReason: "InvalidAnnotation"},
		{name: "global group shared", svc: base(ann("beacon.io/global-group", "a/web", "beacon.io/allow-shared-ip", "k")), errReason: "InvalidAnnotation"},
		{
			name: "several addresses",
			svc:  base(ann("beacon.io/address-count", "3")),
			want: want(func(a *ipamv1.Allocation) { a.AddressCount = 3 }),
		},
		{name: "one address", svc: base(ann("beacon.io/address-count", " 1 ")), want: want(nil)},
		{name: "address count too high", svc: base(ann("beacon.io/address-count", "17")), errReason: "InvalidAnnotation"},
		{name: "address count not a number", svc: base(ann("beacon.io/address-count", "three")), errReason: "InvalidAnnotation"},
		{name: "address count zero", svc: base(ann("beacon.io/address-count", "0")), errReason: "InvalidAnnotation"},
		{name: "address count with an address", svc: base(ann("beacon.io/address-count", "2", "beacon.io/loadBalancerIPs", "192.0.2.1")), errReason: "InvalidAnnotation"},
		{name: "address count shared", svc: base(ann("beacon.io/address-count", "2", "beacon.io/allow-shared-ip", "k")), errReason: "InvalidAnnotation"},
		{name: "address count in a global group", svc: base(ann("beacon.io/address-count", "2", "beacon.io/global-group", "a/web")), errReason: "InvalidAnnotation"},
		{name: "global role alone", svc: base(ann("beacon.io/global-role", "backup")), errReason: "InvalidAnnotation"},
		{name: "bad global role", svc: base(ann("beacon.io/global-group", "a/web", "beacon.io/global-role", "standby")), errReason: "InvalidAnnotation"},
		{name: "bad address", svc: base(ann("metallb.io/loadBalancerIPs", "192.0.2.300")), errReason: "InvalidAnnotation"},
		{name: "two of one family", svc: base(ann("metallb.io/loadBalancerIPs", "192.0.2.1,192.0.2.2")), errReason: "InvalidAnnotation"},
		{name: "family not on the Service", svc: base(ann("metallb.io/loadBalancerIPs", "2001:db8::1")), errReason: "InvalidAnnotation"},
		{name: "require dual-stack with one address", svc: base(func(s *Service) {
			s.IPFamilies, s.IPFamilyPolicy = []string{"IPv4", "IPv6"}, "RequireDualStack"
			ann("metallb.io/loadBalancerIPs", "192.0.2.1")(s)
		}), errReason: "InvalidAnnotation"},
		{name: "empty pool", svc: base(ann("metallb.io/address-pool", " ")), errReason: "InvalidAnnotation"},
		{name: "unknown protocol", svc: base(func(s *Service) { s.Ports = []Port{{Port: 1, Protocol: "QUIC"}} }), errReason: "InvalidService"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warns, err := Build(tt.svc, opts)
			if tt.errReason != "" {
				var e *Error
				if !errors.As(err, &e) || e.Reason != tt.errReason {
					t.Fatalf("err = %v, want reason %s", err, tt.errReason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("allocation (-want +got):\n%s", diff)
			}
			var reasons []string
			for _, w := range warns {
				reasons = append(reasons, w.Reason)
			}
			if diff := cmp.Diff(tt.warnings, reasons); diff != "" {
				t.Errorf("warnings (-want +got):\n%s\n%v", diff, warns)
			}
		})
	}
}
