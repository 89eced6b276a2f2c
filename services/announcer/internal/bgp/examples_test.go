package bgp_test

import (
	"context"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/internal/bgp/bgplab"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// TestRouterExamples brings up the router-side configurations that
// docs/announcement.md shows, as netlab renders them, against a speaker
// configured as a BGPPeer with a password and a BFD profile becomes: FRR
// (bgpd with bfdd) and BIRD 2 with TCP-MD5 and BFD, gobgpd with TCP-MD5
// (Debian's gobgpd 3.x has no BFD). Each session must reach Established,
// with BFD up where configured, and carry the route. The rendered
// configurations are logged for comparison with the documentation.
func TestRouterExamples(t *testing.T) {
	requireRouters(t, netlab.FRRZebra, netlab.FRRBfdd, netlab.FRRBgpd, "vtysh", "bird", "birdc", "gobgpd", "gobgp")
	t.Parallel()
	ctx := context.Background()
	lab := netlab.NewForTest(t)
	rf := addHost(t, lab, "frr", 1)
	rb := addHost(t, lab, "bird", 2)
	rg := addHost(t, lab, "gobgpd", 3)
	node := addHost(t, lab, "node", 11)
	const secret = "s3cret-md5"
	timers := &netlab.FRRBFD{Receive: 300 * time.Millisecond, Transmit: 300 * time.Millisecond, Multiplier: 3}

	frrConf := netlab.FRRConfig{ASN: 64500, RouterID: rf.Addr4(), WithZebra: true, Neighbors: []netlab.FRRNeighbor{
		{Address: node.Addr4(), ASN: 64512, Password: secret, BFD: timers, LocalAddress: rf.Addr4()},
	}}
	birdConf := netlab.BIRDConfig{RouterID: rb.Addr4(), ASN: 64500, BFD: timers, Neighbors: []netlab.BIRDNeighbor{
		{Name: "beacon_node11", Address: node.Addr4(), LocalAddress: rb.Addr4(), ASN: 64512, Password: secret, BFD: true, ExportNone: true},
	}}
	gobgpdConf := netlab.GoBGPdConfig{ASN: 64500, RouterID: rg.Addr4(), Neighbors: []netlab.GoBGPdNeighbor{
		{Address: node.Addr4(), ASN: 64512, Password: secret},
	}}
	t.Logf("frr.conf:\n%s\nbird.conf:\n%s\ngobgpd.toml:\n%s", frrConf.Config(), birdConf.Config(), gobgpdConf.Config())
	frr, err := rf.StartFRR(ctx, frrConf)
	if err != nil {
		t.Fatal(err)
	}
	bird, err := rb.StartBIRD(ctx, birdConf)
	if err != nil {
		t.Fatal(err)
	}
	gobgpd, err := rg.StartGoBGPd(ctx, gobgpdConf)
	if err != nil {
		t.Fatal(err)
	}

	// What the reconciler makes of a BGPPeer {my_asn 64512, peer_asn 64500,
	// password, bfd_profile {300 ms, 300 ms, × 3}}.
	bfd := &bgp.BFDConfig{RxInterval: timers.Receive, TxInterval: timers.Transmit, DetectMultiplier: uint32(timers.Multiplier)}
	peer := func(name string, h *netlab.Host, withBFD bool) bgp.PeerConfig {
		p := bgp.PeerConfig{Name: name, MyASN: 64512, PeerASN: 64500, Address: h.Addr4(), Password: secret, ConnectRetry: 2 * time.Second}
		if withBFD {
			p.BFD = bfd
		}
		return p
	}
	sp := startSpeaker(t, node, bgplab.ChildOptions{})
	pfx := prefix("203.0.113.10/32")
	if err := sp.Apply(ctx, []bgp.PeerConfig{peer("frr", rf, true), peer("bird", rb, true), peer("gobgpd", rg, false)},
		[]bgp.Route{{Prefix: pfx, Peer: "frr"}, {Prefix: pfx, Peer: "bird"}, {Prefix: pfx, Peer: "gobgpd"}}); err != nil {
		t.Fatal(err)
	}
	if err := sp.WaitEstablished(ctx, 45*time.Second, true, "frr", "bird"); err != nil {
		t.Fatal(err)
	}
	if err := sp.WaitEstablished(ctx, 45*time.Second, false, "gobgpd"); err != nil {
		t.Fatal(err)
	}
	for _, r := range []netlab.Router{frr, bird, gobgpd} {
		if _, err := netlab.WaitPath(ctx, r, pfx, 15*time.Second, nil); err != nil {
			t.Errorf("%s: %v", r.Name(), err)
		}
	}
}
