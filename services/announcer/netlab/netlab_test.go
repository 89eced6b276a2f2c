package netlab

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseBIRDRoutes(t *testing.T) {
	out := `BIRD 2.0.12 ready.
Table master4:
203.0.113.10/32      unicast [n0 12:48:43.526] * (100) [AS64501i]
	via 192.0.2.11 on eth0
	Type: BGP univ
	BGP.origin: IGP
	BGP.as_path: 64501
	BGP.next_hop: 192.0.2.11
	BGP.local_pref: 100
	BGP.community: (65000,200) (65000,100)
	BGP.large_community: (1, 2, 3)
                     unicast [n1 12:48:44.000] (100) [i]
	via 192.0.2.12 on eth0
	Type: BGP univ
	BGP.origin: IGP
	BGP.as_path: 
	BGP.next_hop: 192.0.2.12
	BGP.local_pref: 250

Table master6:
2001:db8:100::10/128 unicast [n2 12:48:43.526] * (100) [?]
	via 2001:db8::11 on eth0
	Type: BGP univ
	BGP.next_hop: 2001:db8::11 fe80::1
	BGP.local_pref: 100
`
	got, err := parseBIRDRoutes(out)
	if err != nil {
		t.Fatal(err)
	}
	p4 := netip.MustParsePrefix("203.0.113.10/32")
	p6 := netip.MustParsePrefix("2001:db8:100::10/128")
	want := RIB{
		p4: {
			{Prefix: p4, NextHop: netip.MustParseAddr("192.0.2.11"), ASPath: "64501", LocalPref: 100,
				Communities: []string{"65000:100", "65000:200"}, LargeCommunities: []string{"1:2:3"}, Best: true},
			{Prefix: p4, NextHop: netip.MustParseAddr("192.0.2.12"), LocalPref: 250},
		},
		p6: {{Prefix: p6, NextHop: netip.MustParseAddr("2001:db8::11"), LocalPref: 100, Best: true}},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("parse (-want +got):\n%s", diff)
	}
}

func TestParseFRRDetail(t *testing.T) {
	out := `{"routes": { "203.0.113.10/32": [{"prefix":"203.0.113.10/32","version":1},{"aspath":{"string":"Local","segments":[],"length":0},"origin":"incomplete","locPrf":250,"valid":true,"version":1,"bestpath":{"bestpathFromAs":0,"overall":true},"community":{"string":"65000:100 65000:200","list":["65000:200","65000:100"]},"largeCommunity":{"string":"1:2:3","list":["1:2:3"]},"nexthops":[{"ip":"192.0.2.11","afi":"ipv4","used":true}],"peer":{"peerId":"192.0.2.11","type":"internal"}}] } }`
	rib := RIB{}
	if err := parseFRRDetail(out, rib); err != nil {
		t.Fatal(err)
	}
	p := netip.MustParsePrefix("203.0.113.10/32")
	want := RIB{p: {{Prefix: p, NextHop: netip.MustParseAddr("192.0.2.11"), LocalPref: 250,
		Communities: []string{"65000:100", "65000:200"}, LargeCommunities: []string{"1:2:3"}, Best: true}}}
	if diff := cmp.Diff(want, rib, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("parse (-want +got):\n%s", diff)
	}
}

// TestRoutersSeeGoBGPd checks the lab and the three RIB readers end to end:
// gobgpd on a node advertises routes with communities to FRR (eBGP), BIRD
// (iBGP) and another gobgpd, and each router's reader sees the attributes.
func TestRoutersSeeGoBGPd(t *testing.T) {
	RequireBinaries(t, FRRBgpd, "vtysh", "bird", "birdc", "gobgpd", "gobgp")
	lab := NewForTest(t)
	ctx := context.Background()
	pfx := netip.MustParsePrefix
	node, err := lab.AddHost(ctx, "node", pfx("192.0.2.11/24"), pfx("2001:db8::11/64"))
	if err != nil {
		t.Fatal(err)
	}
	r1, err := lab.AddHost(ctx, "frr", pfx("192.0.2.1/24"), pfx("2001:db8::1/64"))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := lab.AddHost(ctx, "bird", pfx("192.0.2.2/24"), pfx("2001:db8::2/64"))
	if err != nil {
		t.Fatal(err)
	}
	frr, err := r1.StartFRR(ctx, FRRConfig{ASN: 64500, RouterID: r1.Addr4(), Neighbors: []FRRNeighbor{
		{Address: node.Addr4(), ASN: 64501},
		{Address: node.Addr6(), ASN: 64501},
	}})
	if err != nil {
		t.Fatal(err)
	}
	bird, err := r2.StartBIRD(ctx, BIRDConfig{RouterID: r2.Addr4(), ASN: 64501, Neighbors: []BIRDNeighbor{
		{Address: node.Addr4(), LocalAddress: r2.Addr4(), ASN: 64501},
	}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := node.StartGoBGPd(ctx, GoBGPdConfig{ASN: 64501, RouterID: node.Addr4(), Neighbors: []GoBGPdNeighbor{
		{Address: r1.Addr4(), ASN: 64500},
		{Address: r1.Addr6(), ASN: 64500},
		{Address: r2.Addr4(), ASN: 64501},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.CLI(ctx, "global", "rib", "add", "203.0.113.10/32", "community", "65000:100,65000:200", "large-community", "1:2:3", "local-pref", "250"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.CLI(ctx, "global", "rib", "-a", "ipv6", "add", "2001:db8:100::10/128", "community", "65000:7"); err != nil {
		t.Fatal(err)
	}
	p4, p6 := pfx("203.0.113.10/32"), pfx("2001:db8:100::10/128")
	wantComms := []string{"65000:100", "65000:200"}
	check := func(p Path) error {
		if diff := cmp.Diff(wantComms, p.Communities); diff != "" {
			return fmt.Errorf("communities: %s", diff)
		}
		if diff := cmp.Diff([]string{"1:2:3"}, p.LargeCommunities); diff != "" {
			return fmt.Errorf("large communities: %s", diff)
		}
		return nil
	}
	for _, r := range []Router{frr, bird, g} {
		if _, err := WaitPath(ctx, r, p4, 20*time.Second, check); err != nil {
			t.Error(err)
		}
	}
	got, err := WaitPath(ctx, bird, p4, time.Second, nil)
	if err != nil || got.LocalPref != 250 {
		t.Errorf("bird (iBGP) local pref = %d, %v; want 250", got.LocalPref, err)
	}
	if _, err := WaitPath(ctx, frr, p6, 20*time.Second, func(p Path) error {
		if diff := cmp.Diff([]string{"65000:7"}, p.Communities); diff != "" {
			return fmt.Errorf("communities: %s", diff)
		}
		if p.NextHop != node.Addr6() {
			return fmt.Errorf("next hop %s", p.NextHop)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if _, err := g.CLI(ctx, "global", "rib", "del", "203.0.113.10/32"); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Router{frr, bird} {
		if err := WaitNoPath(ctx, r, p4, 10*time.Second); err != nil {
			t.Error(err)
		}
	}
}
