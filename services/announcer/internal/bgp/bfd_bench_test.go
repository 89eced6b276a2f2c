package bgp_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/internal/bgp/bgplab"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// TestBenchBFDRecover is `make bench`'s BFD recovery figure (skipped
// unless BEACON_BENCH=1; root, FRR and BIRD needed): with the tight
// profile the field used (50 ms × 3), trials of every failure kind (a
// speaker frozen for 1 s, egress lost for 1.5, 4 and 8 s, a 300 ms stall),
// each timed from the end of the failure to the session Established again
// with the router holding the path. It prints
//
//	BENCH bfd_recover_bird_p99, _p50 and bfd_recover_frr_p99 (the same
//	against FRR, whose bfdd keeps its BFD session: the reference)
//	BENCH bfd_idle_losses_50ms and _300ms: sessions lost with nothing
//	induced, over BEACON_BFD_IDLE (default 60 s) per profile, on this host
func TestBenchBFDRecover(t *testing.T) {
	if os.Getenv("BEACON_BENCH") == "" {
		t.Skip("SKIPPED: a benchmark (minutes); BEACON_BENCH=1 runs it (make bench does)")
	}
	requireRouters(t, netlab.FRRZebra, netlab.FRRBfdd, netlab.FRRBgpd, "vtysh", "bird", "birdc")
	ctx := context.Background()
	tight := bgp.BFDConfig{RxInterval: 50 * time.Millisecond, TxInterval: 50 * time.Millisecond, DetectMultiplier: 3}
	loose := bgp.BFDConfig{RxInterval: 300 * time.Millisecond, TxInterval: 300 * time.Millisecond, DetectMultiplier: 3}
	round := []bgplab.Failure{
		{Kind: bgplab.Freeze, For: time.Second},
		{Kind: bgplab.EgressLoss, For: 1500 * time.Millisecond},
		{Kind: bgplab.EgressLoss, For: 4 * time.Second},
		{Kind: bgplab.EgressLoss, For: 8 * time.Second},
		{Kind: bgplab.Freeze, For: 300 * time.Millisecond},
	}
	var failures []bgplab.Failure
	for range 4 {
		failures = append(failures, round...)
	}
	samples, err := bgplab.MeasureRecovery(ctx, bgplab.RecoverConfig{
		BFD: tight, HoldTime: 9 * time.Second, ConnectRetry: 2 * time.Second, Failures: failures,
		Lab: netlab.NewForTest(t), Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	var bird, frr []time.Duration
	lost := 0
	for _, s := range samples {
		bird, frr = append(bird, s.BIRD), append(frr, s.FRR)
		lost += len(s.Lost)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	fmt.Printf("BENCH bfd_recover_bird_p50 %.1f ms\n", ms(bgplab.Percentile(bird, 0.5)))
	fmt.Printf("BENCH bfd_recover_bird_p99 %.1f ms\n", ms(bgplab.Percentile(bird, 0.99)))
	fmt.Printf("BENCH bfd_recover_frr_p99 %.1f ms\n", ms(bgplab.Percentile(frr, 0.99)))
	// With 50 ms × 3 a stall of the host itself ends sessions at random:
	// a figure, not a failure.
	t.Logf("%d trials; sessions lost again within 5 s of recovering: %d", len(samples), lost)
	fmt.Printf("BENCH bfd_recover_lost_again_50ms %d sessions/%d trials\n", lost, len(samples))

	idle := 60 * time.Second
	if v, err := time.ParseDuration(os.Getenv("BEACON_BFD_IDLE")); err == nil {
		idle = v
	}
	for _, p := range []struct {
		name string
		bfd  bgp.BFDConfig
	}{{"50ms", tight}, {"300ms", loose}} {
		losses, without, err := bgplab.MeasureIdle(ctx, bgplab.RecoverConfig{BFD: p.bfd, Lab: netlab.NewForTest(t), Logf: t.Logf}, idle)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("BFD %s × 3, nothing induced for %v: %d sessions lost, routers without the path for %v in all", p.name, idle, losses, without.Round(time.Millisecond))
		fmt.Printf("BENCH bfd_idle_losses_%s %d sessions/%s\n", p.name, losses, idle)
	}
}
