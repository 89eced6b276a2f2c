package bgp_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/internal/bgp/bgplab"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// TestSessionsReportWhatPeersAreSent peers one speaker with FRR, BIRD and
// gobgpd over IPv4 and over IPv6, and asks it to advertise an IPv4 and an
// IPv6 prefix to all six sessions, as a plan from a planner that ignored
// families would. Apply refuses the six cross-family routes and applies the
// rest; each router holds each prefix only from the session of its family;
// and Sessions reports, per peer, exactly the prefix that peer was sent.
// Withdrawing one prefix shows in Sessions too.
func TestSessionsReportWhatPeersAreSent(t *testing.T) {
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
	bird, err := rb.StartBIRD(ctx, netlab.BIRDConfig{RouterID: rb.Addr4(), ASN: 64502, Neighbors: []netlab.BIRDNeighbor{
		{Address: node.Addr4(), LocalAddress: rb.Addr4(), ASN: 64501},
		{Address: node.Addr6(), LocalAddress: rb.Addr6(), ASN: 64501},
	}})
	if err != nil {
		t.Fatal(err)
	}
	gobgpd, err := rg.StartGoBGPd(ctx, netlab.GoBGPdConfig{ASN: 64503, RouterID: rg.Addr4(), Neighbors: []netlab.GoBGPdNeighbor{
		{Address: node.Addr4(), ASN: 64501},
		{Address: node.Addr6(), ASN: 64501},
	}})
	if err != nil {
		t.Fatal(err)
	}

	sp := startSpeaker(t, node, bgplab.ChildOptions{})
	var peers []bgp.PeerConfig
	for _, r := range []struct {
		name string
		asn  uint32
		host *netlab.Host
	}{{"frr", 64500, rf}, {"bird", 64502, rb}, {"gobgpd", 64503, rg}} {
		peers = append(peers,
			bgp.PeerConfig{Name: r.name + "4", MyASN: 64501, PeerASN: r.asn, Address: r.host.Addr4()},
			bgp.PeerConfig{Name: r.name + "6", MyASN: 64501, PeerASN: r.asn, Address: r.host.Addr6()})
	}
	p4, p6 := prefix("203.0.113.7/32"), prefix("2001:db8:100::7/128")
	var routes []bgp.Route
	for _, p := range peers {
		routes = append(routes, bgp.Route{Prefix: p4, Peer: p.Name}, bgp.Route{Prefix: p6, Peer: p.Name})
	}
	err = sp.Apply(ctx, peers, routes)
	if err == nil {
		t.Fatal("Apply took IPv6 routes to IPv4 peers and the reverse")
	}
	t.Logf("Apply refused: %v", err)
	names := make([]string, 0, len(peers))
	for _, p := range peers {
		names = append(names, p.Name)
	}
	if err := sp.WaitEstablished(ctx, 30*time.Second, false, names...); err != nil {
		t.Fatal(err)
	}

	for _, r := range []netlab.Router{frr, bird, gobgpd} {
		if _, err := netlab.WaitPath(ctx, r, p4, 10*time.Second, onlyFrom(node.Addr4())); err != nil {
			t.Error(err)
		}
		if _, err := netlab.WaitPath(ctx, r, p6, 10*time.Second, onlyFrom(node.Addr6())); err != nil {
			t.Error(err)
		}
	}
	want := map[string][]netip.Prefix{}
	for _, p := range peers {
		want[p.Name] = []netip.Prefix{p4}
		if p.Address.Is6() {
			want[p.Name] = []netip.Prefix{p6}
		}
	}
	if err := waitSent(ctx, sp, want); err != nil {
		t.Error(err)
	}
	// Each router has seen both prefixes, so it has seen every update the
	// speaker sent it: no path of the other family came over a session.
	for _, r := range []netlab.Router{frr, bird, gobgpd} {
		rib, err := r.RIB(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []netip.Prefix{p4, p6} {
			if len(rib[p]) != 1 {
				t.Errorf("%s holds %v for %s, want one path", r.Name(), rib[p], p)
			}
		}
	}

	// The same prefixes to their own families only: nothing refused.
	routes = routes[:0]
	for _, p := range peers {
		pfx := p4
		if p.Address.Is6() {
			pfx = p6
		}
		routes = append(routes, bgp.Route{Prefix: pfx, Peer: p.Name})
	}
	if err := sp.Apply(ctx, peers, routes); err != nil {
		t.Fatalf("Apply of same-family routes: %v", err)
	}
	// p4 withdrawn from BIRD only.
	routes = slicesDeleteRoute(routes, "bird4")
	if err := sp.Apply(ctx, peers, routes); err != nil {
		t.Fatal(err)
	}
	if err := netlab.WaitNoPath(ctx, bird, p4, 10*time.Second); err != nil {
		t.Error(err)
	}
	want["bird4"] = nil
	if err := waitSent(ctx, sp, want); err != nil {
		t.Error(err)
	}
}

func slicesDeleteRoute(routes []bgp.Route, peer string) []bgp.Route {
	var out []bgp.Route
	for _, r := range routes {
		if r.Peer != peer {
			out = append(out, r)
		}
	}
	return out
}

// onlyFrom checks that a router's best path has the next hop nh.
func onlyFrom(nh netip.Addr) func(netlab.Path) error {
	return func(p netlab.Path) error {
		if p.NextHop != nh {
			return fmt.Errorf("next hop %s, want %s", p.NextHop, nh)
		}
		return nil
	}
}

// waitSent waits until Sessions reports exactly want as the prefixes each
// peer is sent.
func waitSent(ctx context.Context, sp *bgplab.Speaker, want map[string][]netip.Prefix) error {
	var diff string
	err := netlab.Eventually(ctx, 10*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		all, err := sp.Sessions(ctx)
		if err != nil {
			return err
		}
		got := map[string][]netip.Prefix{}
		for _, s := range all {
			got[s.Peer] = s.Prefixes
		}
		if diff = cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }), cmpopts.EquateEmpty()); diff != "" {
			return errors.New("sessions differ")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("prefixes sent per peer (-want +got):\n%s", diff)
	}
	return nil
}
