package bgplab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// MeasureConfig describes a node-death measurement: a speaker on a node
// advertises one prefix to FRR (with zebra, so the route lands in the
// router's kernel table); each trial silences the node (all its egress
// dropped: no FIN, no NOTIFICATION, nothing) and times how long until the
// route leaves the router's kernel table, then restores the node and waits
// for the route to come back.
type MeasureConfig struct {
	Trials int
	// BFD, when set, runs BFD on the session with these timers (FRR's bfdd
	// gets the same ones). Nil: no BFD, the hold timer finds the death.
	BFD *bgp.BFDConfig
	// HoldTime of the session (default 3 s, the shortest allowed: the
	// time to beat without BFD).
	HoldTime time.Duration
	// Lab to build in; nil: a Lab of its own, closed at the end.
	Lab *netlab.Lab
	// Logf receives a line per trial (nil: silence).
	Logf func(format string, args ...any)
}

// Result holds a measurement's samples and their percentiles
// (nearest-rank).
type Result struct {
	Samples  []time.Duration
	P50, P99 time.Duration
	// DropCommand is the longest time the command that silenced the node
	// took; each sample is timed from just before it started, so the
	// samples include up to this much of it.
	DropCommand time.Duration
}

// MeasureBFDWithdraw measures node death to withdrawal at FRR with BFD at
// 50 ms × 3, over trials trials. The calling binary must dispatch to
// ChildMain when IsChild (see the package doc); it needs root and FRR.
func MeasureBFDWithdraw(trials int) (p50, p99 time.Duration, err error) {
	r, err := Measure(context.Background(), MeasureConfig{
		Trials: trials,
		BFD:    &bgp.BFDConfig{RxInterval: 50 * time.Millisecond, TxInterval: 50 * time.Millisecond, DetectMultiplier: 3},
	})
	return r.P50, r.P99, err
}

// Measure runs the measurement cfg describes.
func Measure(ctx context.Context, cfg MeasureConfig) (res Result, err error) {
	if cfg.Trials < 1 {
		return Result{}, errors.New("bgplab: at least one trial")
	}
	if cfg.HoldTime == 0 {
		cfg.HoldTime = 3 * time.Second
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	lab := cfg.Lab
	if lab == nil {
		if lab, err = netlab.New(nil); err != nil {
			return Result{}, err
		}
		defer func() { err = errors.Join(err, lab.Close()) }()
	}
	router, err := lab.AddHost(ctx, "router", netip.MustParsePrefix("192.0.2.1/24"))
	if err != nil {
		return Result{}, err
	}
	node, err := lab.AddHost(ctx, "node", netip.MustParsePrefix("192.0.2.11/24"))
	if err != nil {
		return Result{}, err
	}
	nb := netlab.FRRNeighbor{Address: node.Addr4(), ASN: 64501, Keepalive: cfg.HoldTime / 3, HoldTime: cfg.HoldTime}
	if b := cfg.BFD; b != nil {
		nb.BFD = &netlab.FRRBFD{Receive: b.RxInterval, Transmit: b.TxInterval, Multiplier: int(b.DetectMultiplier)}
		nb.LocalAddress = router.Addr4()
	}
	frr, err := router.StartFRR(ctx, netlab.FRRConfig{ASN: 64500, RouterID: router.Addr4(), WithZebra: true, Neighbors: []netlab.FRRNeighbor{nb}})
	if err != nil {
		return Result{}, err
	}
	mon, err := router.MonitorRoutes(ctx)
	if err != nil {
		return Result{}, err
	}
	sp, err := Start(node, ChildOptions{RouterID: node.Addr4()})
	if err != nil {
		return Result{}, err
	}
	prefix := netip.MustParsePrefix("198.51.100.10/32")
	peer := bgp.PeerConfig{Name: "router", MyASN: 64501, PeerASN: 64500, Address: router.Addr4(),
		HoldTime: cfg.HoldTime, ConnectRetry: 2 * time.Second, BFD: cfg.BFD}
	if err := sp.Apply(ctx, []bgp.PeerConfig{peer}, []bgp.Route{{Prefix: prefix, Peer: peer.Name}}); err != nil {
		return Result{}, err
	}

	since := time.Time{}
	for i := range cfg.Trials {
		if err := ready(ctx, frr, sp, mon, prefix, since, cfg.BFD != nil); err != nil {
			return res, fmt.Errorf("bgplab: trial %d: %w", i+1, err)
		}
		if last, _ := mon.Last(prefix); last.Deleted {
			// A flap between ready and now: wait for the route again.
			logf("trial %d: the route flapped before the node was silenced; waiting again", i+1)
			if err := ready(ctx, frr, sp, mon, prefix, last.At, cfg.BFD != nil); err != nil {
				return res, fmt.Errorf("bgplab: trial %d: %w", i+1, err)
			}
		}
		t0 := time.Now()
		if err := node.DropEgress(ctx); err != nil {
			return res, err
		}
		res.DropCommand = max(res.DropCommand, time.Since(t0))
		wait, cancel := context.WithTimeout(ctx, cfg.HoldTime+10*time.Second)
		ev, err := mon.Wait(wait, prefix, true, t0)
		cancel()
		if rerr := node.RestoreEgress(ctx); rerr != nil {
			return res, errors.Join(err, rerr)
		}
		since = time.Now()
		if err != nil {
			return res, fmt.Errorf("bgplab: trial %d: %w", i+1, err)
		}
		d := ev.At.Sub(t0)
		res.Samples = append(res.Samples, d)
		logf("trial %d: node silenced, route gone from the router's kernel after %v", i+1, d.Round(time.Millisecond))
	}
	res.P50 = Percentile(res.Samples, 0.50)
	res.P99 = Percentile(res.Samples, 0.99)
	return res, nil
}

// ready waits until the route is in the router's kernel (added since
// since), the session is established and, with BFD, both sides see BFD up.
func ready(ctx context.Context, frr *netlab.FRR, sp *Speaker, mon *netlab.RouteMonitor, prefix netip.Prefix, since time.Time, bfd bool) error {
	wait, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := mon.Wait(wait, prefix, false, since); err != nil {
		return err
	}
	return netlab.Eventually(ctx, 30*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		st, err := sp.Session(ctx, "router")
		if err != nil {
			return err
		}
		if st.State != bgp.StateEstablished || (bfd && !st.BFDUp) {
			return fmt.Errorf("speaker: %+v", st)
		}
		if !bfd {
			return nil
		}
		peers, err := frr.BFDPeers(ctx)
		if err != nil {
			return err
		}
		for _, p := range peers {
			if p.Status != "up" {
				return fmt.Errorf("FRR's BFD session with %s is %s", p.Peer, p.Status)
			}
		}
		if len(peers) == 0 {
			return errors.New("FRR has no BFD session")
		}
		return nil
	})
}

// Percentile returns the nearest-rank q-quantile (0 < q <= 1) of ds.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(q*float64(len(s)) + 0.999999)
	return s[min(max(rank, 1), len(s))-1]
}
