package bgp_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/internal/bgp/bgplab"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// bfdBar tells BFD's detection from the hold timer's: far below the 9 s
// hold time, and loose enough for a loaded 2-core machine, where the drop
// command alone has taken 270 ms. The design's 300 ms bar for the p99 is
// measured by make bench (bgp_bfd_withdraw), not asserted here.
const bfdBar = 1500 * time.Millisecond

// TestBFDNodeDeath runs BFD at 50 ms × 3 between the speaker and FRR's bfdd
// and silences the node (all egress dropped) five times: each time the
// route must leave the router's kernel table well before any hold timer
// could notice (bfdBar). Not parallel: it measures.
func TestBFDNodeDeath(t *testing.T) {
	requireRouters(t, netlab.FRRZebra, netlab.FRRBfdd, netlab.FRRBgpd, "vtysh")
	lab := netlab.NewForTest(t)
	res, err := bgplab.Measure(context.Background(), bgplab.MeasureConfig{
		Trials:   5,
		BFD:      &bgp.BFDConfig{RxInterval: 50 * time.Millisecond, TxInterval: 50 * time.Millisecond, DetectMultiplier: 3},
		HoldTime: 9 * time.Second,
		Lab:      lab,
		Logf:     t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("BFD 50ms x 3, node death to withdrawal at FRR's kernel: p50 %v, p99 %v over %d trials (samples %v; the drop command took up to %v of each)",
		res.P50.Round(time.Millisecond), res.P99.Round(time.Millisecond), len(res.Samples), res.Samples, res.DropCommand.Round(time.Millisecond))
	if res.P99 > bfdBar {
		t.Errorf("p99 %v is above the %v bar", res.P99, bfdBar)
	}
}

// TestHoldTimerNodeDeath is the same death without BFD: only the hold timer
// (3 s, the shortest) finds it.
func TestHoldTimerNodeDeath(t *testing.T) {
	requireRouters(t, netlab.FRRZebra, netlab.FRRBgpd, "vtysh")
	t.Parallel()
	lab := netlab.NewForTest(t)
	res, err := bgplab.Measure(context.Background(), bgplab.MeasureConfig{Trials: 1, HoldTime: 3 * time.Second, Lab: lab, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("no BFD, hold time 3s: node death to withdrawal at FRR's kernel %v", res.P50.Round(time.Millisecond))
	if res.P50 < 2*time.Second || res.P50 > 5*time.Second {
		t.Errorf("withdrawal after %v; the hold timer (3 s, keepalive 1 s) should take 2-4 s", res.P50)
	}
}

// TestBFDRecovers induces BFD failures of each kind on a node with BFD
// sessions to BIRD and FRR (300 ms × 3, a profile that survives a loaded
// host; detection 900 ms): the speaker frozen for two seconds, the node's
// egress lost for three, and a 1.2 s stall (shorter than the hold time,
// longer than BFD's detection time). After each, every session must be
// Established again, with its router holding the path, within the hold
// time plus one connect retry, and stay up for five seconds. Before the
// workaround in bfdreset.go, BIRD's session looped (issue 20). With 50 or
// 100 ms × 3 this box's own stalls (300 ms seen at a load of 12 on two
// cores) end sessions at random: see TestBenchBFDRecover. Not parallel: it
// measures.
func TestBFDRecovers(t *testing.T) {
	requireRouters(t, netlab.FRRZebra, netlab.FRRBfdd, netlab.FRRBgpd, "vtysh", "bird", "birdc")
	cfg := bgplab.RecoverConfig{
		BFD:          bgp.BFDConfig{RxInterval: 300 * time.Millisecond, TxInterval: 300 * time.Millisecond, DetectMultiplier: 3},
		HoldTime:     9 * time.Second,
		ConnectRetry: 2 * time.Second,
		Failures: []bgplab.Failure{
			{Kind: bgplab.Freeze, For: 2 * time.Second},
			{Kind: bgplab.EgressLoss, For: 3 * time.Second},
			{Kind: bgplab.Freeze, For: 1200 * time.Millisecond},
		},
		Stable: 5 * time.Second,
		Lab:    netlab.NewForTest(t),
		Logf:   t.Logf,
		Debug:  os.Getenv("BEACON_BFD_DEBUG") != "",
	}
	samples, err := bgplab.MeasureRecovery(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	bar := cfg.HoldTime + cfg.ConnectRetry
	for _, s := range samples {
		if s.BIRD > bar || s.FRR > bar {
			t.Errorf("%v: back after %v (BIRD), %v (FRR); the bar is the hold time plus a connect retry, %v", s.Failure, s.BIRD, s.FRR, bar)
		}
		if len(s.Lost) > 0 {
			t.Errorf("%v: sessions %v went down again within %v of coming back", s.Failure, s.Lost, cfg.Stable)
		}
	}
}

// TestGoBGPBFDKeepsStaleDiscriminator is the minimal reproduction of the
// other half of issue 20, GoBGP's BFD against a router that re-creates its
// BFD session (BIRD does for every BGP session): `birdc restart` gives
// BIRD's BFD session a new discriminator; GoBGP's BFD, Up and bound to the
// old one, discards the new session's packets (RFC 5880 6.8.6 would take
// them, and go Down at once on their state Down) and keeps sending the old
// discriminator, which BIRD rejects, until its detection time expires. If
// GoBGP learns to follow, its log says "Remote peer signaled BFD down"
// instead of "Expired", and this test fails.
func TestGoBGPBFDKeepsStaleDiscriminator(t *testing.T) {
	requireRouters(t, "bird", "birdc")
	t.Parallel()
	ctx := context.Background()
	lab := netlab.NewForTest(t)
	rb := addHost(t, lab, "bird", 2)
	node := addHost(t, lab, "node", 11)
	bird, err := rb.StartBIRD(ctx, netlab.BIRDConfig{RouterID: rb.Addr4(), ASN: 64500,
		BFD: &netlab.FRRBFD{Receive: 100 * time.Millisecond, Transmit: 100 * time.Millisecond, Multiplier: 3}, Neighbors: []netlab.BIRDNeighbor{{
			Address: node.Addr4(), LocalAddress: rb.Addr4(), ASN: 64501, HoldTime: 9 * time.Second,
			ErrorWait: [2]time.Duration{time.Second, 2 * time.Second},
			BFD:       true,
		}}})
	if err != nil {
		t.Fatal(err)
	}
	sp := startSpeaker(t, node, bgplab.ChildOptions{})
	bfd := &bgp.BFDConfig{RxInterval: 100 * time.Millisecond, TxInterval: 100 * time.Millisecond, DetectMultiplier: 3}
	if err := sp.Apply(ctx, []bgp.PeerConfig{{Name: "bird", MyASN: 64501, PeerASN: 64500, Address: rb.Addr4(),
		HoldTime: 9 * time.Second, ConnectRetry: 2 * time.Second, BFD: bfd}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := sp.WaitEstablished(ctx, 30*time.Second, true, "bird"); err != nil {
		t.Fatal(err)
	}
	if _, err := bird.Birdc(ctx, "restart", "n0"); err != nil {
		t.Fatal(err)
	}
	logHas := func(p *netlab.Proc, s string) error {
		b, err := os.ReadFile(p.LogPath)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), s) {
			return fmt.Errorf("%s's log has no %q yet", p.Name, s)
		}
		return nil
	}
	if err := netlab.Eventually(ctx, 10*time.Second, 20*time.Millisecond, func(context.Context) error {
		return errors.Join(
			logHas(bird.Proc(), "unknown session id"),
			logHas(sp.Proc, `msg=Expired component=gobgp Topic=bfd Peer=`+rb.Addr4().String()))
	}); err != nil {
		t.Fatal(err)
	}
	// And the workaround: the session comes back.
	if err := sp.WaitEstablished(ctx, 20*time.Second, true, "bird"); err != nil {
		t.Fatal(err)
	}
}
