package ipam

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

func TestAllocationIDIsStableAndShaped(t *testing.T) {
	got := AllocationID("default/nginx")
	if got != AllocationID("default/nginx") || len(got) != 21 || got[0] != 'a' {
		t.Fatalf("AllocationID = %q", got)
	}
	if got == AllocationID("default/nginx2") {
		t.Fatal("different owners share an ID")
	}
}

func TestCandidatePoolsOrder(t *testing.T) {
	sel := selector.Selector{MatchLabels: map[string]string{"team": "a"}}
	pools := []*Pool{
		{Name: "plain-b", AutoAssign: true},
		{Name: "plain-a", AutoAssign: true},
		{Name: "prio2", AutoAssign: true, Policy: &Policy{Priority: 2}},
		{Name: "prio1", AutoAssign: true, Policy: &Policy{Priority: 1}},
		{Name: "policy-unset", AutoAssign: true, Policy: &Policy{Namespaces: []string{"prod"}}},
		{Name: "manual", AutoAssign: false},
		{Name: "other-tenant", AutoAssign: true, Tenants: []string{"c2"}},
		{Name: "team-a", AutoAssign: true, Policy: &Policy{Priority: 3, OwnerSelectors: []selector.Selector{sel}}},
		{Name: "deleting", AutoAssign: true, Deleting: true},
	}
	tests := []struct {
		name string
		a    Allocation
		want []string
	}{
		{"prod namespace, team a", Allocation{Tenant: "c1", Namespace: "prod", OwnerLabels: map[string]string{"team": "a"}},
			[]string{"prio1", "prio2", "team-a", "policy-unset", "plain-a", "plain-b"}},
		{"other namespace", Allocation{Tenant: "c1", Namespace: "dev"},
			[]string{"prio1", "prio2", "plain-a", "plain-b"}},
		{"tenant c2", Allocation{Tenant: "c2", Namespace: "dev"},
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
	both := func(Family) bool { return true }
	only4 := func(f Family) bool { return f == IPv4 }
	only6 := func(f Family) bool { return f == IPv6 }
	tests := []struct {
		name string
		a    Allocation
		has  func(Family) bool
		want [][]Family
	}{
		{"default single, dual pool", Allocation{}, both, [][]Family{{IPv4}, {IPv6}}},
		{"default single, v6 pool", Allocation{}, only6, [][]Family{{IPv6}}},
		{"v6 single", Allocation{Families: []Family{IPv6}}, both, [][]Family{{IPv6}}},
		{"v6 single, v4 pool", Allocation{Families: []Family{IPv6}}, only4, nil},
		{"require dual", Allocation{FamilyPolicy: RequireDualStack}, both, [][]Family{{IPv4, IPv6}}},
		{"require dual, v4 pool", Allocation{FamilyPolicy: RequireDualStack}, only4, nil},
		{"require dual v6 primary", Allocation{FamilyPolicy: RequireDualStack, Families: []Family{IPv6, IPv4}}, both, [][]Family{{IPv6, IPv4}}},
		{"prefer dual, v4 pool", Allocation{FamilyPolicy: PreferDualStack}, only4, [][]Family{{IPv4}}},
		{"prefer dual, v6 pool", Allocation{FamilyPolicy: PreferDualStack}, only6, [][]Family{{IPv6}}},
		{"prefer dual v4 primary, v6 pool", Allocation{FamilyPolicy: PreferDualStack, Families: []Family{IPv4}}, only6, nil},
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
	http := []Port{{Number: 80}}
	dns := []Port{{Number: 53, Protocol: UDP}}
	claim := &Claim{Tenant: "c1", SharingKey: "k", Holders: []Holder{{Allocation: "a1", Ports: http}}}
	tests := []struct {
		name string
		a    Allocation
		want bool
	}{
		{"same key, other ports", Allocation{ID: "a2", Tenant: "c1", SharingKey: "k", Ports: dns}, true},
		{"same key, port clash", Allocation{ID: "a2", Tenant: "c1", SharingKey: "k", Ports: http}, false},
		{"same key, no ports", Allocation{ID: "a2", Tenant: "c1", SharingKey: "k"}, false},
		{"other key", Allocation{ID: "a2", Tenant: "c1", SharingKey: "x", Ports: dns}, false},
		{"no key", Allocation{ID: "a2", Tenant: "c1", Ports: dns}, false},
		{"other tenant", Allocation{ID: "a2", Tenant: "c2", SharingKey: "k", Ports: dns}, false},
		{"same protocol other port", Allocation{ID: "a2", Tenant: "c1", SharingKey: "k", Ports: []Port{{Number: 443}}}, true},
		{"same port other protocol", Allocation{ID: "a2", Tenant: "c1", SharingKey: "k", Ports: []Port{{Number: 80, Protocol: UDP}}}, true},
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
	single := &Allocation{Pool: "web", Addrs: []netip.Addr{v4}}
	dual := &Allocation{Pool: "web", Addrs: []netip.Addr{v4, v6}}
	tests := []struct {
		name     string
		existing *Allocation
		req      Allocation
		want     bool
	}{
		{"plain", single, Allocation{}, true},
		{"same pool", single, Allocation{RequestedPool: "web"}, true},
		{"other pool", single, Allocation{RequestedPool: "db"}, false},
		{"same address", single, Allocation{RequestedAddrs: []netip.Addr{v4}}, true},
		{"other address", single, Allocation{RequestedAddrs: []netip.Addr{v6}}, false},
		{"v6 wanted", single, Allocation{Families: []Family{IPv6}}, false},
		{"dual wanted from single", single, Allocation{FamilyPolicy: RequireDualStack}, false},
		{"dual wanted from dual", dual, Allocation{FamilyPolicy: RequireDualStack}, true},
		{"single wanted from dual", dual, Allocation{}, false},
		{"prefer dual from dual", dual, Allocation{FamilyPolicy: PreferDualStack}, true},
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
	p := &Policy{
		Namespaces:         []string{"prod"},
		NamespaceSelectors: []selector.Selector{{MatchLabels: map[string]string{"env": "prod"}}},
	}
	if !PolicyMatches(p, &Allocation{Namespace: "prod", NamespaceLabels: map[string]string{"env": "prod"}}) {
		t.Error("matching owner refused")
	}
	if PolicyMatches(p, &Allocation{Namespace: "prod"}) {
		t.Error("namespace labels not checked")
	}
	if PolicyMatches(p, &Allocation{Namespace: "dev", NamespaceLabels: map[string]string{"env": "prod"}}) {
		t.Error("namespace not checked")
	}
	if !PolicyMatches(nil, &Allocation{}) {
		t.Error("nil policy must match")
	}
}
