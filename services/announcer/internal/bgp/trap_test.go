package bgp_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/internal/bgp/bgplab"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// TestStaleRouteTrap reproduces the scenario of the lab notes (docs/lab.md): two nodes
// advertise one prefix through the same routers (BIRD and gobgpd), node A
// over eBGP and node B over iBGP. The routers prefer B's path (shorter AS
// path) and send it to A. Then B goes away and A withdraws. With GoBGP v3
// the routers kept A's route forever; a speaker without the import policy
// also keeps the learned path in its own table. Here the routers must end
// clean and stay clean, and A's table must never hold a learned path even
// though the routers did send it one.
func TestStaleRouteTrap(t *testing.T) {
	requireRouters(t, "bird", "birdc", "gobgpd", "gobgp")
	t.Parallel()
	ctx := context.Background()
	lab := netlab.NewForTest(t)
	rb := addHost(t, lab, "bird", 2)
	rg := addHost(t, lab, "gobgpd", 3)
	nodeA := addHost(t, lab, "a", 11)
	nodeB := addHost(t, lab, "b", 12)
	bird, err := rb.StartBIRD(ctx, netlab.BIRDConfig{RouterID: rb.Addr4(), ASN: 64500, Neighbors: []netlab.BIRDNeighbor{
		{Name: "a", Address: nodeA.Addr4(), LocalAddress: rb.Addr4(), ASN: 64501},
		{Name: "b", Address: nodeB.Addr4(), LocalAddress: rb.Addr4(), ASN: 64500},
	}})
	if err != nil {
		t.Fatal(err)
	}
	gobgpd, err := rg.StartGoBGPd(ctx, netlab.GoBGPdConfig{ASN: 64500, RouterID: rg.Addr4(), Neighbors: []netlab.GoBGPdNeighbor{
		{Address: nodeA.Addr4(), ASN: 64501},
		{Address: nodeB.Addr4(), ASN: 64500},
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := prefix("203.0.113.50/32")
	routers := []netlab.Router{bird, gobgpd}
	speak := func(node *netlab.Host, asn uint32) *bgplab.Speaker {
		sp := startSpeaker(t, node, bgplab.ChildOptions{})
		peers := []bgp.PeerConfig{
			{Name: "bird", MyASN: asn, PeerASN: 64500, Address: rb.Addr4()},
			{Name: "gobgpd", MyASN: asn, PeerASN: 64500, Address: rg.Addr4()},
		}
		if err := sp.Apply(ctx, peers, []bgp.Route{{Prefix: p, Peer: "bird"}, {Prefix: p, Peer: "gobgpd"}}); err != nil {
			t.Fatal(err)
		}
		return sp
	}
	a := speak(nodeA, 64501)
	b := speak(nodeB, 64500)

	// Both paths at both routers, and the routers' best (B's) sent to A.
	err = netlab.Eventually(ctx, 30*time.Second, 50*time.Millisecond, func(ctx context.Context) error {
		for _, r := range routers {
			rib, err := r.RIB(ctx)
			if err != nil {
				return err
			}
			if n := len(rib[p]); n != 2 {
				return fmt.Errorf("%s has %d paths for %s: %v", r.Name(), n, p, rib[p])
			}
			if best, _ := rib.Best(p); best.NextHop != nodeB.Addr4() {
				return fmt.Errorf("%s prefers %s", r.Name(), best)
			}
		}
		sessions, err := a.Sessions(ctx)
		if err != nil {
			return err
		}
		for _, s := range sessions {
			if s.State != bgp.StateEstablished || s.Received < 1 {
				return fmt.Errorf("node A's session %+v has not received the router's path yet", s)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := a.Learned(ctx); err != nil || n != 0 {
		t.Fatalf("node A holds %d learned paths (%v): the import policy must reject them", n, err)
	}

	// B goes away, then A withdraws.
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	err = netlab.Eventually(ctx, 10*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		for _, r := range routers {
			rib, err := r.RIB(ctx)
			if err != nil {
				return err
			}
			if best, ok := rib.Best(p); !ok || best.NextHop != nodeA.Addr4() || len(rib[p]) != 1 {
				return fmt.Errorf("%s: %v", r.Name(), rib[p])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(ctx, []bgp.PeerConfig{
		{Name: "bird", MyASN: 64501, PeerASN: 64500, Address: rb.Addr4()},
		{Name: "gobgpd", MyASN: 64501, PeerASN: 64500, Address: rg.Addr4()},
	}, nil); err != nil {
		t.Fatal(err)
	}
	clean := func(ctx context.Context) error {
		for _, r := range routers {
			if err := absent(ctx, r, p); err != nil {
				return fmt.Errorf("stale route: %w", err)
			}
		}
		if n, err := a.Learned(ctx); err != nil || n != 0 {
			return fmt.Errorf("node A holds %d learned paths (%w)", n, err)
		}
		return nil
	}
	if err := netlab.Eventually(ctx, 10*time.Second, 20*time.Millisecond, clean); err != nil {
		t.Fatal(err)
	}
	if err := netlab.Consistently(ctx, 3*time.Second, 100*time.Millisecond, clean); err != nil {
		t.Fatal(err)
	}
}
