package assign

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

func TestCandidatePoolsOrder(t *testing.T) {
	sel := selector.Selector{MatchLabels: map[string]string{"team": "a"}}
	pools := []*ipam.Pool{
		{Name: "plain-b", AutoAssign: true},
		{Name: "plain-a", AutoAssign: true},
		{Name: "prio2", AutoAssign: true, Policy: &ipam.Policy{Priority: 2}},
		{Name: "prio1", AutoAssign: true, Policy: &ipam.Policy{Priority: 1}},
		{Name: "policy-unset", AutoAssign: true, Policy: &ipam.Policy{Namespaces: []string{"prod"}}},
		{Name: "manual", AutoAssign: false},
		{Name: "other-tenant", AutoAssign: true, Tenants: []string{"c2"}},
		{Name: "team-a", AutoAssign: true, Policy: &ipam.Policy{Priority: 3, OwnerSelectors: []selector.Selector{sel}}},
		{Name: "deleting", AutoAssign: true, Deleting: true},
	}
	tests := []struct {
		name string
		a    ipam.Allocation
		want []string
	}{
		{"prod namespace, team a", ipam.Allocation{Tenant: "c1", Namespace: "prod", OwnerLabels: selector.SetOf(map[string]string{"team": "a"})},
			[]string{"prio1", "prio2", "team-a", "policy-unset", "plain-a", "plain-b"}},
		{"other namespace", ipam.Allocation{Tenant: "c1", Namespace: "dev"},
			[]string{"prio1", "prio2", "plain-a", "plain-b"}},
		{"tenant c2", ipam.Allocation{Tenant: "c2", Namespace: "dev"},
			[]string{"prio1", "prio2", "other-tenant", "plain-a", "plain-b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range CandidatePools(pools, &tt.a) {
				got = append(got, p.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFamilyChoices(t *testing.T) {
	both := func(ipam.Family) bool { return true }
	only4 := func(f ipam.Family) bool { return f == ipam.IPv4 }
	only6 := func(f ipam.Family) bool { return f == ipam.IPv6 }
	tests := []struct {
		name string
		a    ipam.Allocation
		has  func(ipam.Family) bool
		want [][]ipam.Family
	}{
		{"default single, dual pool", ipam.Allocation{}, both, [][]ipam.Family{{ipam.IPv4}, {ipam.IPv6}}},
		{"default single, v6 pool", ipam.Allocation{}, only6, [][]ipam.Family{{ipam.IPv6}}},
		{"v6 single", ipam.Allocation{Families: []ipam.Family{ipam.IPv6}}, both, [][]ipam.Family{{ipam.IPv6}}},
		{"v6 single, v4 pool", ipam.Allocation{Families: []ipam.Family{ipam.IPv6}}, only4, nil},
		{"require dual", ipam.Allocation{FamilyPolicy: ipam.RequireDualStack}, both, [][]ipam.Family{{ipam.IPv4, ipam.IPv6}}},
		{"require dual, v4 pool", ipam.Allocation{FamilyPolicy: ipam.RequireDualStack}, only4, nil},
		{"require dual v6 primary", ipam.Allocation{FamilyPolicy: ipam.RequireDualStack, Families: []ipam.Family{ipam.IPv6, ipam.IPv4}}, both, [][]ipam.Family{{ipam.IPv6, ipam.IPv4}}},
		{"prefer dual, v4 pool", ipam.Allocation{FamilyPolicy: ipam.PreferDualStack}, only4, [][]ipam.Family{{ipam.IPv4}}},
		{"prefer dual, v6 pool", ipam.Allocation{FamilyPolicy: ipam.PreferDualStack}, only6, [][]ipam.Family{{ipam.IPv6}}},
		{"prefer dual v4 primary, v6 pool", ipam.Allocation{FamilyPolicy: ipam.PreferDualStack, Families: []ipam.Family{ipam.IPv4}}, only6, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, FamilyChoices(&tt.a, tt.has)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSharing(t *testing.T) {
	http := []ipam.Port{{Number: 80}}
	dns := []ipam.Port{{Number: 53, Protocol: ipam.UDP}}
	claim := &ipam.Claim{Tenant: "c1", SharingKey: "k", Holders: []ipam.Holder{{Allocation: "a1", Ports: http}}}
	tests := []struct {
		name string
		a    ipam.Allocation
		want bool
	}{
		{"same key, other ports", ipam.Allocation{ID: "a2", Tenant: "c1", SharingKey: "k", Ports: dns}, true},
		{"same key, port clash", ipam.Allocation{ID: "a2", Tenant: "c1", SharingKey: "k", Ports: http}, false},
		{"same key, no ports", ipam.Allocation{ID: "a2", Tenant: "c1", SharingKey: "k"}, false},
		{"other key", ipam.Allocation{ID: "a2", Tenant: "c1", SharingKey: "x", Ports: dns}, false},
		{"no key", ipam.Allocation{ID: "a2", Tenant: "c1", Ports: dns}, false},
		{"other tenant", ipam.Allocation{ID: "a2", Tenant: "c2", SharingKey: "k", Ports: dns}, false},
		{"same protocol other port", ipam.Allocation{ID: "a2", Tenant: "c1", SharingKey: "k", Ports: []ipam.Port{{Number: 443}}}, true},
		{"same port other protocol", ipam.Allocation{ID: "a2", Tenant: "c1", SharingKey: "k", Ports: []ipam.Port{{Number: 80, Protocol: ipam.UDP}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CanShare(claim, &tt.a); got != tt.want {
				t.Errorf("CanShare = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSatisfies(t *testing.T) {
	v4, v6 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")
	single := &ipam.Allocation{Pool: "web", Addrs: []netip.Addr{v4}}
	dual := &ipam.Allocation{Pool: "web", Addrs: []netip.Addr{v4, v6}}
	tests := []struct {
		name     string
		existing *ipam.Allocation
		req      ipam.Allocation
		want     bool
	}{
		{"plain", single, ipam.Allocation{}, true},
		{"same pool", single, ipam.Allocation{RequestedPool: "web"}, true},
		{"other pool", single, ipam.Allocation{RequestedPool: "db"}, false},
		{"same address", single, ipam.Allocation{RequestedAddrs: []netip.Addr{v4}}, true},
		{"other address", single, ipam.Allocation{RequestedAddrs: []netip.Addr{v6}}, false},
		{"v6 wanted", single, ipam.Allocation{Families: []ipam.Family{ipam.IPv6}}, false},
		{"dual wanted from single", single, ipam.Allocation{FamilyPolicy: ipam.RequireDualStack}, false},
		{"dual wanted from dual", dual, ipam.Allocation{FamilyPolicy: ipam.RequireDualStack}, true},
		{"single wanted from dual", dual, ipam.Allocation{}, false},
		{"prefer dual from dual", dual, ipam.Allocation{FamilyPolicy: ipam.PreferDualStack}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Satisfies(tt.existing, &tt.req); got != tt.want {
				t.Errorf("Satisfies = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPolicyMatches(t *testing.T) {
	p := &ipam.Policy{
		Namespaces:         []string{"prod"},
		NamespaceSelectors: []selector.Selector{{MatchLabels: map[string]string{"env": "prod"}}},
	}
	if !PolicyMatches(p, &ipam.Allocation{Namespace: "prod", NamespaceLabels: selector.SetOf(map[string]string{"env": "prod"})}) {
		t.Error("matching owner refused")
	}
	if PolicyMatches(p, &ipam.Allocation{Namespace: "prod"}) {
		t.Error("namespace labels not checked")
	}
	if PolicyMatches(p, &ipam.Allocation{Namespace: "dev", NamespaceLabels: selector.SetOf(map[string]string{"env": "prod"})}) {
		t.Error("namespace not checked")
	}
	if !PolicyMatches(nil, &ipam.Allocation{}) {
		t.Error("nil policy must match")
	}
}
