package bgp

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	api "github.com/osrg/gobgp/v4/api"
	"google.golang.org/protobuf/testing/protocmp"
)

var (
	addr   = netip.MustParseAddr
	prefix = netip.MustParsePrefix
)

func testOpts() Options {
	return Options{RouterID: addr("192.0.2.11")}.withDefaults()
}

func peer(name, address string) PeerConfig {
	return PeerConfig{Name: name, MyASN: 64501, PeerASN: 64500, Address: addr(address)}
}

func TestNewPlanRefusesWhatCannotWork(t *testing.T) {
	r1, r6 := peer("r1", "192.0.2.1"), peer("r6", "2001:db8::1")
	tests := []struct {
		name   string
		peers  []PeerConfig
		routes []Route
		want   []error // wrapped, in order
		peersN int
		routeN int
	}{
		{name: "valid", peers: []PeerConfig{r1, r6},
			routes: []Route{{Prefix: prefix("203.0.113.1/32"), Peer: "r1"}, {Prefix: prefix("2001:db8:1::1/128"), Peer: "r6"}},
			peersN: 2, routeN: 2},
		{name: "no name", peers: []PeerConfig{peer("", "192.0.2.1")}, want: []error{ErrInvalidPeer}},
		{name: "no ASN", peers: []PeerConfig{{Name: "x", Address: addr("192.0.2.1"), PeerASN: 1}}, want: []error{ErrInvalidPeer}},
		{name: "duplicate name", peers: []PeerConfig{r1, func() PeerConfig { p := r1; p.Address = addr("192.0.2.2"); return p }()},
			want: []error{ErrDuplicatePeer}, peersN: 1},
		{name: "duplicate address", peers: []PeerConfig{r1, peer("r2", "192.0.2.1")}, want: []error{ErrDuplicatePeer}, peersN: 1},
		{name: "per-peer router ID", peers: []PeerConfig{func() PeerConfig { p := r1; p.RouterID = addr("192.0.2.99"); return p }()},
			want: []error{ErrInvalidPeer}},
		{name: "same router ID is fine", peers: []PeerConfig{func() PeerConfig { p := r1; p.RouterID = addr("192.0.2.11"); return p }()},
			peersN: 1},
		{name: "hold time too short", peers: []PeerConfig{func() PeerConfig { p := r1; p.HoldTime = 2 * time.Second; return p }()},
			want: []error{ErrInvalidPeer}},
		{name: "keepalive not below hold", peers: []PeerConfig{func() PeerConfig { p := r1; p.HoldTime, p.KeepaliveTime = 3*time.Second, 3*time.Second; return p }()},
			want: []error{ErrInvalidPeer}},
		{name: "source of the other family", peers: []PeerConfig{func() PeerConfig { p := r1; p.SourceAddress = addr("2001:db8::11"); return p }()},
			want: []error{ErrInvalidPeer}},
		{name: "route to unknown peer", peers: []PeerConfig{r1}, routes: []Route{{Prefix: prefix("203.0.113.1/32"), Peer: "nope"}},
			want: []error{ErrUnknownPeer}, peersN: 1},
		{name: "IPv6 route to IPv4 peer", peers: []PeerConfig{r1}, routes: []Route{{Prefix: prefix("2001:db8:1::1/128"), Peer: "r1"}},
			want: []error{ErrFamilyMismatch}, peersN: 1},
		{name: "host bits", peers: []PeerConfig{r1}, routes: []Route{{Prefix: prefix("203.0.113.1/24"), Peer: "r1"}},
			want: []error{ErrInvalidRoute}, peersN: 1},
		{name: "same route twice is one", peers: []PeerConfig{r1},
			routes: []Route{{Prefix: prefix("203.0.113.1/32"), Peer: "r1", Communities: []uint32{2, 1}}, {Prefix: prefix("203.0.113.1/32"), Peer: "r1", Communities: []uint32{1, 2, 2}}},
			peersN: 1, routeN: 1},
		{name: "same route, other attributes", peers: []PeerConfig{r1},
			routes: []Route{{Prefix: prefix("203.0.113.1/32"), Peer: "r1", LocalPref: 1}, {Prefix: prefix("203.0.113.1/32"), Peer: "r1", LocalPref: 2}},
			want:   []error{ErrConflictingRoute}, peersN: 1, routeN: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPlan(testOpts(), tc.peers, tc.routes)
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("error %v does not wrap %v", err, w)
				}
			}
			if len(tc.want) == 0 && err != nil {
				t.Errorf("unexpected error: %v", err)
			}
			routes := 0
			for _, byPeer := range p.adverts {
				routes += len(byPeer)
			}
			if len(p.peers) != tc.peersN || routes != tc.routeN {
				t.Errorf("kept %d peers and %d routes, want %d and %d", len(p.peers), routes, tc.peersN, tc.routeN)
			}
		})
	}
}

func TestSamePeer(t *testing.T) {
	base := normalizePeer(peer("r1", "192.0.2.1"))
	withBFD := func(b BFDConfig) PeerConfig { p := peer("r1", "192.0.2.1"); p.BFD = &b; return normalizePeer(p) }
	tests := []struct {
		name string
		a, b PeerConfig
		want bool
	}{
		{"equal", base, normalizePeer(peer("r1", "192.0.2.1")), true},
		{"defaults are explicit", base, normalizePeer(func() PeerConfig { p := peer("r1", "192.0.2.1"); p.HoldTime = 90 * time.Second; p.Port = 179; return p }()), true},
		{"other password", base, normalizePeer(func() PeerConfig { p := peer("r1", "192.0.2.1"); p.Password = "x"; return p }()), false},
		{"BFD on", base, withBFD(BFDConfig{}), false},
		{"same BFD by value", withBFD(BFDConfig{RxInterval: 50 * time.Millisecond}), withBFD(BFDConfig{RxInterval: 50 * time.Millisecond, TxInterval: time.Second, DetectMultiplier: 3}), true},
		{"other BFD", withBFD(BFDConfig{RxInterval: 50 * time.Millisecond}), withBFD(BFDConfig{RxInterval: 100 * time.Millisecond}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := samePeer(tc.a, tc.b); got != tc.want {
				t.Errorf("samePeer = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPoliciesGiveEachPeerItsAttributes(t *testing.T) {
	p, err := newPlan(testOpts(),
		[]PeerConfig{peer("a", "192.0.2.2"), peer("b", "192.0.2.1")},
		[]Route{
			{Prefix: prefix("203.0.113.1/32"), Peer: "a", Communities: []uint32{65000<<16 | 1}},
			{Prefix: prefix("203.0.113.2/32"), Peer: "a", Communities: []uint32{65000<<16 | 1}},
			{Prefix: prefix("203.0.113.1/32"), Peer: "b", LargeCommunities: [][3]uint32{{1, 2, 3}}, LocalPref: 200},
		})
	if err != nil {
		t.Fatal(err)
	}
	want := &api.SetPoliciesRequest{
		DefinedSets: []*api.DefinedSet{
			{DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: "beacon-peer0", List: []string{"192.0.2.1/32"}},
			{DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: "beacon-peer0-set0", Prefixes: []*api.Prefix{
				{IpPrefix: "203.0.113.1/32", MaskLengthMin: 32, MaskLengthMax: 32}}},
			{DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: "beacon-peer1", List: []string{"192.0.2.2/32"}},
			{DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: "beacon-peer1-set1", Prefixes: []*api.Prefix{
				{IpPrefix: "203.0.113.1/32", MaskLengthMin: 32, MaskLengthMax: 32},
				{IpPrefix: "203.0.113.2/32", MaskLengthMin: 32, MaskLengthMax: 32}}},
		},
		Policies: []*api.Policy{
			{Name: importPolicy, Statements: []*api.Statement{{
				Name:       importPolicy + "-local",
				Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
				Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
			}}},
			{Name: exportPolicy, Statements: []*api.Statement{
				{
					Name: "beacon-peer0-set0",
					Conditions: &api.Conditions{
						NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: "beacon-peer0"},
						PrefixSet:   &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: "beacon-peer0-set0"},
					},
					Actions: &api.Actions{
						RouteAction:    api.RouteAction_ROUTE_ACTION_ACCEPT,
						LargeCommunity: &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: []string{"1:2:3"}},
						LocalPref:      &api.LocalPrefAction{Value: 200},
					},
				},
				{
					Name: "beacon-peer1-set1",
					Conditions: &api.Conditions{
						NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: "beacon-peer1"},
						PrefixSet:   &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: "beacon-peer1-set1"},
					},
					Actions: &api.Actions{
						RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
						Community:   &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: []string{"65000:1"}},
					},
				},
			}},
		},
	}
	if diff := cmp.Diff(want, policies(p), protocmp.Transform()); diff != "" {
		t.Errorf("policies (-want +got):\n%s", diff)
	}
}

func TestNeedsSoftReset(t *testing.T) {
	a, b := peer("a", "192.0.2.1"), peer("b", "192.0.2.2")
	mk := func(routes ...Route) plan {
		p, err := newPlan(testOpts(), []PeerConfig{a, b}, routes)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p1 := prefix("203.0.113.1/32")
	p2 := prefix("203.0.113.2/32")
	tests := []struct {
		name      string
		old, next plan
		want      []string
	}{
		{"nothing changes", mk(Route{Prefix: p1, Peer: "a"}), mk(Route{Prefix: p1, Peer: "a"}), nil},
		{"new prefix propagates by itself", mk(), mk(Route{Prefix: p1, Peer: "a"}), nil},
		{"gone prefix is withdrawn by itself", mk(Route{Prefix: p1, Peer: "a"}), mk(), nil},
		{"other attributes", mk(Route{Prefix: p1, Peer: "a"}), mk(Route{Prefix: p1, Peer: "a", LocalPref: 5}), []string{"a"}},
		{"taken from one peer, kept for another", mk(Route{Prefix: p1, Peer: "a"}, Route{Prefix: p1, Peer: "b"}), mk(Route{Prefix: p1, Peer: "b"}), []string{"a"}},
		{"given to a second peer", mk(Route{Prefix: p1, Peer: "a"}), mk(Route{Prefix: p1, Peer: "a"}, Route{Prefix: p1, Peer: "b"}), []string{"b"}},
		{"unrelated prefix", mk(Route{Prefix: p1, Peer: "a"}), mk(Route{Prefix: p1, Peer: "a"}, Route{Prefix: p2, Peer: "b"}), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, needsSoftReset(tc.old, tc.next)); diff != "" {
				t.Errorf("needsSoftReset (-want +got):\n%s", diff)
			}
		})
	}
}
