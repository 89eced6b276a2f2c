package bgp_test

import (
	"context"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/internal/bgp/bgplab"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// The bar: node death to withdrawal at the router, p99.
const bfdBar = 300 * time.Millisecond

// TestBFDNodeDeath runs BFD at 50 ms × 3 between the speaker and FRR's bfdd
// and silences the node (all egress dropped) five times: each time the
// route must leave the router's kernel table well before any hold timer
// could notice. Not parallel: it measures.
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
