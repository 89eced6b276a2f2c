package integration

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/netlab"
	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// bfdFast is the BFD profile both sides use: 50 ms × 3.
var bfdFast = &netlab.FRRBFD{Receive: 50 * time.Millisecond, Transmit: 50 * time.Millisecond, Multiplier: 3}

// A BGPPeer with a 50 ms × 3 BFD profile: when the announcing node goes
// silent (all its egress dropped, no FIN, no NOTIFICATION), FRR's bfdd
// notices within three intervals and the route leaves FRR's kernel table.
func TestBFDWithdraw(t *testing.T) {
	requireLab(t, netlab.FRRBgpd, netlab.FRRZebra, netlab.FRRBfdd, "vtysh")
	c := newCluster(t, e2e.Options{Nodes: 1})
	ctx := context.Background()
	frr, err := c.StartFRR(ctx, e2e.NodeASN, true, bfdFast)
	if err != nil {
		t.Fatal(err)
	}
	mon, err := frr.Host().MonitorRoutes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	must(t, c.CreatePool(ctx, "bgp", e2e.BGPPoolRanges...))
	must(t, c.CreateBFDProfile(ctx, "fast", &ipamv1.BFDProfile{
		ReceiveInterval: durationpb.New(bfdFast.Receive), TransmitInterval: durationpb.New(bfdFast.Transmit), DetectMultiplier: uint32(bfdFast.Multiplier),
	}))
	peer := e2e.BGPPeer(e2e.FRRAddr4, e2e.NodeASN, nil)
	peer.BfdProfile = "fast"
	must(t, c.CreateBGPPeer(ctx, "frr", peer))
	must(t, c.CreateBGPAdvertisement(ctx, "adv", &ipamv1.BGPAdvertisement{Pools: []string{"pools/bgp"}}))
	alloc, err := c.Allocate(ctx, "default/api", "bgp", false)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := e2e.Addrs(alloc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.MeasureBFDWithdraw(ctx, frr, mon, c.Nodes[0], e2e.HostPrefix(addrs[0]), 5)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("BFD 50ms x 3: route out of FRR's kernel %v", s)
	if p := s.Percentile(100); p > 400*time.Millisecond {
		t.Errorf("slowest withdrawal %v > 400ms", p)
	}
}
