package bgp_test

import (
	"context"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/internal/bgp/bgplab"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// TestRoutersReceiveTheirRoutes peers one speaker with FRR (eBGP, IPv4 and
// IPv6), BIRD (iBGP, so local preference is carried) and gobgpd (eBGP) and
// reads each router's own table: one prefix reaches three routers with three
// different attribute sets, a second prefix reaches FRR only, an IPv6 prefix
// reaches FRR's IPv6 session; then one router loses a prefix the others keep
// and another gets new attributes; then everything is withdrawn.
func TestRoutersReceiveTheirRoutes(t *testing.T) {
	requireRouters(t, netlab.FRRBgpd, "vtysh", "bird", "birdc", "gobgpd", "gobgp")
	t.Parallel()
	ctx := context.Background()
	lab := netlab.NewForTest(t)
	rf := addHost(t, lab, "frr", 1)
	rb := addHost(t, lab, "bird", 2)
	rg := addHost(t, lab, "gobgpd", 3)
	node := addHost(t, lab, "node", 11)

	frr, err := rf.StartFRR(ctx, netlab.FRRConfig{ASN: 64500, RouterID: rf.Addr4(), Neighbors: []netlab.FRRNeighbor{
		{Address: node.Addr4(), ASN: 64501},
		{Address: node.Addr6(), ASN: 64501},
	}})
	if err != nil {
		t.Fatal(err)
	}
	bird, err := rb.StartBIRD(ctx, netlab.BIRDConfig{RouterID: rb.Addr4(), ASN: 64501, Neighbors: []netlab.BIRDNeighbor{
		{Address: node.Addr4(), LocalAddress: rb.Addr4(), ASN: 64501},
	}})
	if err != nil {
		t.Fatal(err)
	}
	gobgpd, err := rg.StartGoBGPd(ctx, netlab.GoBGPdConfig{ASN: 64502, RouterID: rg.Addr4(), Neighbors: []netlab.GoBGPdNeighbor{
		{Address: node.Addr4(), ASN: 64501},
	}})
	if err != nil {
		t.Fatal(err)
	}

	sp := startSpeaker(t, node, bgplab.ChildOptions{})
	peers := []bgp.PeerConfig{
		{Name: "frr4", MyASN: 64501, PeerASN: 64500, Address: rf.Addr4()},
		{Name: "frr6", MyASN: 64501, PeerASN: 64500, Address: rf.Addr6()},
		{Name: "bird", MyASN: 64501, PeerASN: 64501, Address: rb.Addr4()},
		{Name: "gobgpd", MyASN: 64501, PeerASN: 64502, Address: rg.Addr4()},
	}
	p1, p2, p6 := prefix("203.0.113.1/32"), prefix("203.0.113.2/32"), prefix("2001:db8:100::1/128")
	routes := []bgp.Route{
		{Prefix: p1, Peer: "frr4", Communities: []uint32{community(65000, 1)}, LargeCommunities: [][3]uint32{{64501, 1, 1}}},
		{Prefix: p1, Peer: "bird", Communities: []uint32{community(65000, 2), community(65000, 22)}, LocalPref: 250},
		{Prefix: p1, Peer: "gobgpd", Communities: []uint32{community(65000, 3)}, LargeCommunities: [][3]uint32{{64501, 3, 3}, {64501, 3, 4}}},
		{Prefix: p2, Peer: "frr4"},
		{Prefix: p6, Peer: "frr6", Communities: []uint32{community(65000, 6)}},
	}
	if err := sp.Apply(ctx, peers, routes); err != nil {
		t.Fatal(err)
	}
	if err := sp.WaitEstablished(ctx, 30*time.Second, false, "frr4", "frr6", "bird", "gobgpd"); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	checks := []struct {
		r    netlab.Router
		p    netlab.Path
		want func(netlab.Path) error
	}{
		{frr, netlab.Path{Prefix: p1}, wantPath(node.Addr4(), []string{"65000:1"}, []string{"64501:1:1"}, 0)},
		{frr, netlab.Path{Prefix: p2}, wantPath(node.Addr4(), nil, nil, 0)},
		{frr, netlab.Path{Prefix: p6}, wantPath(node.Addr6(), []string{"65000:6"}, nil, 0)},
		{bird, netlab.Path{Prefix: p1}, wantPath(node.Addr4(), []string{"65000:2", "65000:22"}, nil, 250)},
		{gobgpd, netlab.Path{Prefix: p1}, wantPath(node.Addr4(), []string{"65000:3"}, []string{"64501:3:3", "64501:3:4"}, 0)},
	}
	for _, c := range checks {
		if _, err := netlab.WaitPath(ctx, c.r, c.p.Prefix, 10*time.Second, c.want); err != nil {
			t.Error(err)
		}
	}
	t.Logf("all routes with their attributes at the three routers %v after the sessions were up", time.Since(start).Round(time.Millisecond))
	// The routers have the first prefix, so they have seen the update that
	// would have carried the second: it went to FRR only.
	for _, r := range []netlab.Router{bird, gobgpd} {
		if err := absent(ctx, r, p2, p6); err != nil {
			t.Errorf("peer subset: %v", err)
		}
	}

	// FRR loses p1 (keeps p2), BIRD gets another local preference, gobgpd
	// keeps its route unchanged.
	routes = []bgp.Route{
		{Prefix: p1, Peer: "bird", Communities: []uint32{community(65000, 2)}, LocalPref: 300},
		{Prefix: p1, Peer: "gobgpd", Communities: []uint32{community(65000, 3)}, LargeCommunities: [][3]uint32{{64501, 3, 3}, {64501, 3, 4}}},
		{Prefix: p2, Peer: "frr4"},
		{Prefix: p6, Peer: "frr6", Communities: []uint32{community(65000, 6)}},
	}
	if err := sp.Apply(ctx, peers, routes); err != nil {
		t.Fatal(err)
	}
	if err := netlab.WaitNoPath(ctx, frr, p1, 10*time.Second); err != nil {
		t.Error(err)
	}
	if _, err := netlab.WaitPath(ctx, bird, p1, 10*time.Second, wantPath(node.Addr4(), []string{"65000:2"}, nil, 300)); err != nil {
		t.Error(err)
	}
	for _, c := range checks[1:] {
		if c.r == bird {
			continue
		}
		if _, err := netlab.WaitPath(ctx, c.r, c.p.Prefix, 5*time.Second, c.want); err != nil {
			t.Errorf("unchanged route: %v", err)
		}
	}

	// Everything withdrawn; the sessions stay.
	if err := sp.Apply(ctx, peers, nil); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	for _, r := range []netlab.Router{frr, bird, gobgpd} {
		if err := netlab.Eventually(ctx, 10*time.Second, 10*time.Millisecond, func(ctx context.Context) error {
			return absent(ctx, r, p1, p2, p6)
		}); err != nil {
			t.Error(err)
		}
	}
	t.Logf("withdrawals at the three routers within %v", time.Since(start).Round(time.Millisecond))
	sessions, err := sp.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		if s.State != bgp.StateEstablished || s.Advertised != 0 {
			t.Errorf("after withdrawing all: %+v", s)
		}
	}
	if err := sp.Stop(ctx); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// TestShutdownWithdrawsAtOnce cancels Run's context: the routers must drop
// the routes right away, not after a hold time.
func TestShutdownWithdrawsAtOnce(t *testing.T) {
	requireRouters(t, netlab.FRRBgpd, "vtysh", "bird", "birdc")
	t.Parallel()
	ctx := context.Background()
	lab := netlab.NewForTest(t)
	rf := addHost(t, lab, "frr", 1)
	rb := addHost(t, lab, "bird", 2)
	node := addHost(t, lab, "node", 11)
	frr, err := rf.StartFRR(ctx, netlab.FRRConfig{ASN: 64500, RouterID: rf.Addr4(), Neighbors: []netlab.FRRNeighbor{
		{Address: node.Addr4(), ASN: 64501, Keepalive: 30 * time.Second, HoldTime: 90 * time.Second},
	}})
	if err != nil {
		t.Fatal(err)
	}
	bird, err := rb.StartBIRD(ctx, netlab.BIRDConfig{RouterID: rb.Addr4(), ASN: 64500, Neighbors: []netlab.BIRDNeighbor{
		{Address: node.Addr4(), LocalAddress: rb.Addr4(), ASN: 64501},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sp := startSpeaker(t, node, bgplab.ChildOptions{})
	peers := []bgp.PeerConfig{
		{Name: "frr", MyASN: 64501, PeerASN: 64500, Address: rf.Addr4()},
		{Name: "bird", MyASN: 64501, PeerASN: 64500, Address: rb.Addr4()},
	}
	p := prefix("198.51.100.1/32")
	if err := sp.Apply(ctx, peers, []bgp.Route{{Prefix: p, Peer: "frr"}, {Prefix: p, Peer: "bird"}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []netlab.Router{frr, bird} {
		if _, err := netlab.WaitPath(ctx, r, p, 30*time.Second, nil); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := sp.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	stopped := time.Since(start)
	for _, r := range []netlab.Router{frr, bird} {
		if err := netlab.WaitNoPath(ctx, r, p, 2*time.Second); err != nil {
			t.Error(err)
		}
	}
	t.Logf("Run returned %v after cancel; both routers clean %v after cancel", stopped.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	state, err := frr.NeighborState(ctx, node.Addr4())
	if err != nil || state == "Established" {
		t.Errorf("FRR's session after shutdown: %q, %v", state, err)
	}
}
