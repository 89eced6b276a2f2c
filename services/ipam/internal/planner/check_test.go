package planner

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

func TestCheck(t *testing.T) {
	w := func(res, reason string) Warning { return Warning{Resource: res, Reason: reason} }
	tests := []struct {
		name   string
		change func(in *Input)
		want   []Warning
		// inMessage, when set, must appear in the first warning's message.
		inMessage string
	}{
		{"clean", func(in *Input) {}, nil, ""},
		{"no common node", func(in *Input) {
			in.BGP[0].NodeSelectors = sels("rack", "b")
			in.BGP[0].Peers = []string{"r1"} // r1 selects rack a
		}, []Warning{w("bgpAdvertisements/adv", ReasonNoCommonNode)}, "pools rng, v6, web are announced nowhere"},
		{"common node that is down still counts", func(in *Input) {
			in.BGP[0].NodeSelectors = sels("rack", "b")
			in.BGP[0].Peers = []string{"r2"}
			in.Nodes = in.Nodes[3:] // only n4, dead, in rack b
		}, []Warning{w("bgpAdvertisements/adv", ReasonNoPeerOfFamily), w("bgpPeers/r1", ReasonNoMatchingNode)}, ""},
		{"no node known: node checks skipped", func(in *Input) {
			in.BGP[0].NodeSelectors = sels("rack", "z")
			in.Nodes = nil
		}, nil, ""},
		{"no peer at all", func(in *Input) { in.Peers = nil }, []Warning{w("bgpAdvertisements/adv", ReasonNoCommonNode)}, "no existing peer"},
		{"no IPv6 peer for a pool with IPv6 addresses", func(in *Input) {
			in.Pools["dual"] = pool(t, "dual", []string{"203.0.113.0/28", "2001:db8:2::/124"})
			in.BGP[0].Pools = []string{"dual", "web"}
			in.BGP[0].Peers = []string{"r1", "r2"}
			in.BGP = append(in.BGP, &ipam.BGPAdvertisement{Tenant: tenant, ID: "adv2", Pools: []string{"v6"}, Peers: []string{"r6"}},
				&ipam.BGPAdvertisement{Tenant: tenant, ID: "adv3", Pools: []string{"dual"}, Peers: []string{"r6"}})
		}, []Warning{w("bgpAdvertisements/adv", ReasonNoPeerOfFamily), w("bgpAdvertisements/adv3", ReasonNoPeerOfFamily)},
			"the IPv6 addresses of pools dual are announced nowhere by it"},
		{"only IPv6 peers in the tenant", func(in *Input) { in.Peers = []*ipam.BGPPeer{peer6()} }, []Warning{
			w("bgpAdvertisements/adv", ReasonNoPeerOfFamily),
		}, "the IPv4 addresses of pools rng, web are announced nowhere by it"},
		{"unknown pool and peer", func(in *Input) {
			in.BGP[0].Pools = []string{"web", "gone"}
			in.BGP[0].Peers = []string{"r2", "nope"}
			in.L2 = []*ipam.L2Advertisement{{Tenant: tenant, ID: "l2", Pools: []string{"gone2"}}}
		}, []Warning{
			w("bgpAdvertisements/adv", ReasonUnknownPeer), w("bgpAdvertisements/adv", ReasonUnknownPool),
			w("l2Advertisements/l2", ReasonUnknownPool),
		}, ""},
		{"unknown BFD profile", func(in *Input) { in.Peers[0].BFDProfile = "slow" }, []Warning{w("bgpPeers/r1", ReasonUnknownBFDProfile)}, `"slow"`},
		{"peer selecting no node", func(in *Input) { in.Peers[0].NodeSelectors = sels("rack", "z") }, []Warning{
			w("bgpPeers/r1", ReasonNoMatchingNode),
		}, ""},
		{"communities", func(in *Input) {
			in.BGP[0].Communities = []string{"no-export", "65536:1", "large:1:2", "nope", "1:2", "large:1:2:3"}
			in.Communities = append(in.Communities,
				&ipam.Community{Tenant: tenant, ID: "b", Aliases: []ipam.CommunityAlias{{Name: "no-export", Value: "1:1"}, {Name: "x", Value: "x:1"}}})
		}, []Warning{
			w("bgpAdvertisements/adv", ReasonInvalidCommunity), w("bgpAdvertisements/adv", ReasonInvalidCommunity),
			w("bgpAdvertisements/adv", ReasonUnknownCommunityAlias),
			// b's definition wins over c's: the lower ID.
			w("communities/b", ReasonInvalidCommunity), w("communities/c", ReasonDuplicateCommunityAlias),
		}, ""},
		{"aggregation lengths", func(in *Input) {
			in.BGP[0].AggregationLength = 33
			in.BGP[0].AggregationLengthV6 = 48
			in.BGP = append(in.BGP, &ipam.BGPAdvertisement{Tenant: tenant, ID: "adv2", AggregationLength: 24, Pools: []string{"web", "rng"}})
		}, []Warning{
			w("bgpAdvertisements/adv", ReasonAggregationTooShort), w("bgpAdvertisements/adv", ReasonInvalidAggregationLength),
			w("bgpAdvertisements/adv2", ReasonAggregationTooShort),
		}, ""},
		{"aggregation of another tenant's pool is not checked", func(in *Input) {
			in.Pools["rng"].Tenants = []string{"other"}
			in.BGP[0].AggregationLength = 24
		}, nil, ""},
		{"conflicting local preference", func(in *Input) {
			in.BGP[0].LocalPref = 100
			in.BGP = append(in.BGP,
				&ipam.BGPAdvertisement{Tenant: tenant, ID: "adv2", LocalPref: 200},
				&ipam.BGPAdvertisement{Tenant: tenant, ID: "adv3", LocalPref: 300, Peers: []string{"r2"}}, // eBGP only
				&ipam.BGPAdvertisement{Tenant: tenant, ID: "adv4", LocalPref: 400, NodeSelectors: sels("rack", "b")},
			)
		}, []Warning{
			w("bgpAdvertisements/adv", ReasonConflictingLocalPref), w("bgpAdvertisements/adv2", ReasonConflictingLocalPref),
			w("bgpAdvertisements/adv3", ReasonNoPeerOfFamily), // r2 only: pool v6 nowhere
		}, "give 1 prefixes (first 192.0.2.1/32) different local preferences (100, 200): 100 is used"},
		{"L2 advertisement selecting no node or interface", func(in *Input) {
			in.L2 = []*ipam.L2Advertisement{
				{Tenant: tenant, ID: "a", NodeSelectors: sels("rack", "z")},
				{Tenant: tenant, ID: "b", Interfaces: []string{"bond0"}},
				{Tenant: tenant, ID: "c", Interfaces: []string{"bond0", "eth0"}},
			}
		}, []Warning{w("l2Advertisements/a", ReasonNoMatchingNode), w("l2Advertisements/b", ReasonNoMatchingInterface)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := bgpInput(t)
			in.Peers = append(in.Peers, peer6())
			tt.change(in)
			got := Check(in)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(Warning{}, "Message")); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if tt.inMessage != "" && len(got) > 0 && !strings.Contains(got[0].Message, tt.inMessage) {
				t.Errorf("message %q does not contain %q", got[0].Message, tt.inMessage)
			}
		})
	}
}

func TestParseCommunity(t *testing.T) {
	tests := []struct {
		in      string
		want    communityValue
		wantErr error
	}{
		{in: "0:0", want: communityValue{std: 0}},
		{in: "64500:1", want: communityValue{std: 64500<<16 | 1}},
		{in: "65535:65535", want: communityValue{std: 0xffffffff}},
		{in: "large:4294967295:0:7", want: communityValue{large: true, lg: [3]uint32{4294967295, 0, 7}}},
		{in: "65536:1", wantErr: ipam.ErrInvalidCommunity},
		{in: "1:65536", wantErr: ipam.ErrInvalidCommunity},
		{in: "-1:1", wantErr: ipam.ErrInvalidCommunity},
		{in: "+1:1", wantErr: ipam.ErrInvalidCommunity},
		{in: "1:2:3", wantErr: ipam.ErrInvalidCommunity},
		{in: ":1", wantErr: ipam.ErrInvalidCommunity},
		{in: "1:", wantErr: ipam.ErrInvalidCommunity},
		{in: " 1:2", wantErr: ipam.ErrInvalidCommunity},
		{in: "large:1:2", wantErr: ipam.ErrInvalidCommunity},
		{in: "large:1:2:4294967296", wantErr: ipam.ErrInvalidCommunity},
		{in: "large:1:2:3:4", wantErr: ipam.ErrInvalidCommunity},
		{in: "LARGE:1:2:3", wantErr: ipam.ErrInvalidCommunity},
		{in: "no-export", wantErr: ErrUnknownCommunityAlias},
		{in: "", wantErr: ErrUnknownCommunityAlias},
	}
	for _, tt := range tests {
		got, _, err := parseCommunity(tt.in)
		if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
			t.Errorf("parseCommunity(%q) error = %v, want %v", tt.in, err, tt.wantErr)
			continue
		}
		if err == nil && got != tt.want {
			t.Errorf("parseCommunity(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
	if _, err := ipam.ParseLargeCommunity("1:2:3"); !errors.Is(err, ipam.ErrInvalidCommunity) {
		t.Errorf("ParseLargeCommunity without prefix: %v", err)
	}
}

func TestCommunityAliases(t *testing.T) {
	in := &Input{Communities: []*ipam.Community{
		{ID: "z", Aliases: []ipam.CommunityAlias{{Name: "a", Value: "9:9"}}},
		{ID: "b", Aliases: []ipam.CommunityAlias{{Name: "a", Value: "1:1"}, {Name: "big", Value: "large:1:2:3"}, {Name: "1:1", Value: "2:2"}}},
	}}
	c := compile(in)
	for s, want := range map[string]communityValue{
		"a":   {std: 1<<16 | 1}, // lower ID wins
		"big": {large: true, lg: [3]uint32{1, 2, 3}},
		"1:1": {std: 2<<16 | 2}, // aliases are looked up first, as in MetalLB
		"3:3": {std: 3<<16 | 3},
	} {
		if got, _, err := c.community(s); err != nil || got != want {
			t.Errorf("community(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
}
