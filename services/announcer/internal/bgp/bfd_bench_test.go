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
// unless BEACON_BENCH=1; root, FRR and BIRD needed). With the tight profile
// the field used (50 ms × 3): three rounds of every failure kind (the
// speaker frozen for 1 s, egress lost for 1.5, 4 and 8 s, a 300 ms stall),
// each timed from the end of the failure to the session Established again
// with the router holding the path; then the same with 300 ms × 3 (two
// rounds; the freeze 1.5 s and the stall 1.2 s, beyond its 0.9 s
// detection). It prints
//
//	BENCH bfd_recover_bird_p50, _p99 (50 ms × 3), and bfd_recover_frr_p99
//	  (FRR, whose bfdd keeps its BFD session: the reference)
//	BENCH bfd_recover_lost_again_50ms: sessions lost again within 5 s
//	BENCH bfd_recover_bird_300ms_p99, bfd_recover_frr_300ms_p99, and
//	  bfd_recover_lost_again_300ms
//	BENCH bfd_idle_losses_50ms and _300ms: sessions lost with nothing
//	  induced, over BEACON_BFD_IDLE (default 60 s) per profile, on this host
func TestBenchBFDRecover(t *testing.T) {
	if os.Getenv("BEACON_BENCH") == "" {
		t.Skip("SKIPPED: a benchmark (minutes); BEACON_BENCH=1 runs it (make bench does)")
	}
	requireRouters(t, netlab.FRRZebra, netlab.FRRBfdd, netlab.FRRBgpd, "vtysh", "bird", "birdc")
	ctx := context.Background()
	tight := bgp.BFDConfig{RxInterval: 50 * time.Millisecond, TxInterval: 50 * time.Millisecond, DetectMultiplier: 3}
	loose := bgp.BFDConfig{RxInterval: 300 * time.Millisecond, TxInterval: 300 * time.Millisecond, DetectMultiplier: 3}
	rounds := func(n int, freeze, stall time.Duration) []bgplab.Failure {
		var out []bgplab.Failure
		for range n {
			out = append(out,
				bgplab.Failure{Kind: bgplab.Freeze, For: freeze},
				bgplab.Failure{Kind: bgplab.EgressLoss, For: 1500 * time.Millisecond},
				bgplab.Failure{Kind: bgplab.EgressLoss, For: 4 * time.Second},
				bgplab.Failure{Kind: bgplab.EgressLoss, For: 8 * time.Second},
				bgplab.Failure{Kind: bgplab.Freeze, For: stall})
		}
		return out
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for _, p := range []struct {
		suffix   string
		bfd      bgp.BFDConfig
		failures []bgplab.Failure
	}{
		{"", tight, rounds(3, time.Second, 300*time.Millisecond)},
		{"_300ms", loose, rounds(2, 1500*time.Millisecond, 1200*time.Millisecond)},
	} {
		samples, err := bgplab.MeasureRecovery(ctx, bgplab.RecoverConfig{
			BFD: p.bfd, HoldTime: 9 * time.Second, ConnectRetry: 2 * time.Second, Failures: p.failures,
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
		if p.suffix == "" {
			fmt.Printf("BENCH bfd_recover_bird_p50 %.1f ms\n", ms(bgplab.Percentile(bird, 0.5)))
		}
		fmt.Printf("BENCH bfd_recover_bird%s_p99 %.1f ms\n", p.suffix, ms(bgplab.Percentile(bird, 0.99)))
		fmt.Printf("BENCH bfd_recover_frr%s_p99 %.1f ms\n", p.suffix, ms(bgplab.Percentile(frr, 0.99)))
		// With 50 ms × 3 a stall of the host itself ends sessions at
		// random: a figure, not a failure.
		name := map[string]string{"": "50ms", "_300ms": "300ms"}[p.suffix]
		fmt.Printf("BENCH bfd_recover_lost_again_%s %d sessions/%d trials\n", name, lost, len(samples))
	}

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
