package bgplab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// FailureKind is how a recovery trial makes BFD fail on the node.
type FailureKind string

const (
	// Freeze stops the speaker's process (SIGSTOP, then SIGCONT): nothing
	// is sent or read, as in a hung process or a long CPU stall. A short
	// one (below the hold time, above BFD's detection time) is the stall
	// of a busy host.
	Freeze FailureKind = "freeze"
	// EgressLoss drops every packet the node sends (a zero-length queue on
	// its eth0) while the process runs on and hears everything.
	EgressLoss FailureKind = "egress-loss"
)

// Failure is one induced failure.
type Failure struct {
	Kind FailureKind
	For  time.Duration
}

func (f Failure) String() string { return fmt.Sprintf("%s %v", f.Kind, f.For) }

// RecoverConfig describes a recovery measurement: one speaker on a node
// with BFD sessions to FRR (bfdd, which keeps its BFD session across BGP
// resets) and to BIRD (whose BGP protocol makes a new BFD session, with a
// new discriminator, for every BGP session), one prefix advertised to both.
// Each trial induces one failure, then times how long each session takes
// to be Established again with the router holding the path, then watches
// that both stay up.
type RecoverConfig struct {
	// BFD timers, on all three sides.
	BFD bgp.BFDConfig
	// HoldTime (default 9 s) and ConnectRetry (default 2 s) of the
	// speaker's sessions; BIRD and FRR get the same hold time.
	HoldTime, ConnectRetry time.Duration
	// Failures are the trials, in order.
	Failures []Failure
	// Stable is how long every session must stay up after it recovered
	// (default 5 s).
	Stable time.Duration
	// Lab to build in; nil: a Lab of its own, closed at the end.
	Lab *netlab.Lab
	// Logf receives a line per trial (nil: silence).
	Logf func(format string, args ...any)
	// Debug turns on GoBGP's debug log in the speaker and BIRD's protocol
	// traces (BFD packets included) in the Lab's log files.
	Debug bool
}

// RecoverSample is one trial's outcome.
type RecoverSample struct {
	Failure Failure
	// BIRD and FRR: from the end of the failure to the session Established
	// again (a new one, not the one from before the failure) and the
	// router holding the path.
	BIRD, FRR time.Duration
	// Lost names the sessions that went down again within Stable.
	Lost []string
}

// The speaker's names for the two peers.
const (
	PeerBIRD = "bird"
	PeerFRR  = "frr"
)

// MeasureRecovery runs the measurement cfg describes. It needs root, FRR
// (bgpd, zebra, bfdd) and BIRD; the calling binary must dispatch to
// ChildMain when IsChild.
func MeasureRecovery(ctx context.Context, cfg RecoverConfig) (samples []RecoverSample, err error) {
	cfg = cfg.withDefaults()
	logf := cfg.Logf
	lab := cfg.Lab
	if lab == nil {
		if lab, err = netlab.New(nil); err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, lab.Close()) }()
	}
	r, err := setupRecovery(ctx, lab, cfg)
	if err != nil {
		return nil, err
	}
	sp, node := r.sp, r.node
	for i, f := range cfg.Failures {
		if err := r.ready(ctx, 60*time.Second); err != nil {
			return samples, fmt.Errorf("bgplab: before trial %d: %w", i+1, err)
		}
		start := time.Now()
		if err := induce(ctx, sp, node, f); err != nil {
			return samples, err
		}
		end := time.Now()
		s := RecoverSample{Failure: f}
		got, err := r.back(ctx, start, end, cfg.HoldTime+cfg.ConnectRetry+20*time.Second)
		if err != nil {
			return samples, fmt.Errorf("bgplab: trial %d (%v): %w", i+1, f, err)
		}
		s.BIRD, s.FRR = got[PeerBIRD], got[PeerFRR]
		s.Lost = r.stable(ctx, cfg.Stable)
		samples = append(samples, s)
		logf("trial %d, %v: back after %v (BIRD), %v (FRR); lost again within %v: %v", i+1, f,
			s.BIRD.Round(time.Millisecond), s.FRR.Round(time.Millisecond), cfg.Stable, s.Lost)
	}
	return samples, nil
}

func (cfg RecoverConfig) withDefaults() RecoverConfig {
	if cfg.HoldTime == 0 {
		cfg.HoldTime = 9 * time.Second
	}
	if cfg.ConnectRetry == 0 {
		cfg.ConnectRetry = 2 * time.Second
	}
	if cfg.Stable == 0 {
		cfg.Stable = 5 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return cfg
}

// MeasureIdle builds MeasureRecovery's lab (cfg.Failures and Stable
// unused), waits for every session to be up, and then induces nothing for
// d: it returns how many times a session went down anyway (BFD giving up
// on a slow but live host, mostly) and how long, in all, some router was
// without the path.
func MeasureIdle(ctx context.Context, cfg RecoverConfig, d time.Duration) (losses int, without time.Duration, err error) {
	cfg = cfg.withDefaults()
	lab := cfg.Lab
	if lab == nil {
		if lab, err = netlab.New(nil); err != nil {
			return 0, 0, err
		}
		defer func() { err = errors.Join(err, lab.Close()) }()
	}
	r, err := setupRecovery(ctx, lab, cfg)
	if err != nil {
		return 0, 0, err
	}
	if err := r.ready(ctx, 60*time.Second); err != nil {
		return 0, 0, fmt.Errorf("bgplab: idle: %w", err)
	}
	last := map[string]time.Time{}
	for k, v := range r.since {
		last[k] = v
	}
	down := map[string]bool{}
	prev := time.Now()
	_ = netlab.Consistently(ctx, d, 100*time.Millisecond, func(context.Context) error {
		up, ok := r.look(ctx)
		if !ok {
			return nil // a failed look (a router's CLI timing out) proves nothing
		}
		now := time.Now()
		every := now.Sub(prev)
		prev = now
		for name := range r.routers {
			switch {
			case !up[name]:
				if !down[name] {
					losses++
					cfg.Logf("idle: session %s lost", name)
				}
				down[name] = true
				without += every
			case !r.since[name].Equal(last[name]) && !down[name]:
				losses++ // lost and back between two looks
				cfg.Logf("idle: session %s lost and back", name)
				fallthrough
			default:
				down[name] = false
				last[name] = r.since[name]
			}
		}
		return nil
	})
	return losses, without, nil
}

// setupRecovery builds MeasureRecovery's lab: FRR, BIRD and the speaker's
// node, the prefix advertised to both routers.
func setupRecovery(ctx context.Context, lab *netlab.Lab, cfg RecoverConfig) (*recovery, error) {
	rf, err := lab.AddHost(ctx, "frr", netip.MustParsePrefix("192.0.2.1/24"))
	if err != nil {
		return nil, err
	}
	rb, err := lab.AddHost(ctx, "bird", netip.MustParsePrefix("192.0.2.2/24"))
	if err != nil {
		return nil, err
	}
	node, err := lab.AddHost(ctx, "node", netip.MustParsePrefix("192.0.2.11/24"))
	if err != nil {
		return nil, err
	}
	b := cfg.BFD
	frr, err := rf.StartFRR(ctx, netlab.FRRConfig{ASN: 64500, RouterID: rf.Addr4(), WithZebra: true, Neighbors: []netlab.FRRNeighbor{{
		Address: node.Addr4(), ASN: 64501, Keepalive: cfg.HoldTime / 3, HoldTime: cfg.HoldTime, LocalAddress: rf.Addr4(),
		BFD: &netlab.FRRBFD{Receive: b.RxInterval, Transmit: b.TxInterval, Multiplier: int(b.DetectMultiplier)},
	}}})
	if err != nil {
		return nil, err
	}
	birdDebug := ""
	if cfg.Debug {
		birdDebug = "all"
	}
	bird, err := rb.StartBIRD(ctx, netlab.BIRDConfig{RouterID: rb.Addr4(), ASN: 64502, Debug: birdDebug,
		BFD: &netlab.FRRBFD{Receive: b.RxInterval, Transmit: b.TxInterval, Multiplier: int(b.DetectMultiplier)}, Neighbors: []netlab.BIRDNeighbor{{
			Address: node.Addr4(), LocalAddress: rb.Addr4(), ASN: 64501, HoldTime: cfg.HoldTime, ConnectRetry: cfg.ConnectRetry,
			// BIRD's default (60-300 s) would keep every session down for a
			// minute after any BFD down, whatever the speaker does.
			ErrorWait: [2]time.Duration{time.Second, 2 * time.Second},
			BFD:       true,
		}}})
	if err != nil {
		return nil, err
	}
	sp, err := Start(node, ChildOptions{RouterID: node.Addr4(), GoBGPDebug: cfg.Debug})
	if err != nil {
		return nil, err
	}
	prefix := netip.MustParsePrefix("198.51.100.10/32")
	bfd := cfg.BFD
	peers := []bgp.PeerConfig{
		{Name: PeerFRR, MyASN: 64501, PeerASN: 64500, Address: rf.Addr4(), HoldTime: cfg.HoldTime, ConnectRetry: cfg.ConnectRetry, BFD: &bfd},
		{Name: PeerBIRD, MyASN: 64501, PeerASN: 64502, Address: rb.Addr4(), HoldTime: cfg.HoldTime, ConnectRetry: cfg.ConnectRetry, BFD: &bfd},
	}
	if err := sp.Apply(ctx, peers, []bgp.Route{{Prefix: prefix, Peer: PeerFRR}, {Prefix: prefix, Peer: PeerBIRD}}); err != nil {
		return nil, err
	}
	return &recovery{sp: sp, node: node, routers: map[string]netlab.Router{PeerFRR: frr, PeerBIRD: bird}, prefix: prefix}, nil
}

// induce makes f happen and returns when it is over.
func induce(ctx context.Context, sp *Speaker, node *netlab.Host, f Failure) (err error) {
	switch f.Kind {
	case Freeze:
		if err := sp.Proc.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, sp.Proc.Signal(syscall.SIGCONT)) }()
	case EgressLoss:
		if err := node.DropEgress(ctx); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, node.RestoreEgress(ctx)) }()
	default:
		return fmt.Errorf("bgplab: unknown failure %q", f.Kind)
	}
	t := time.NewTimer(f.For)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// recovery watches the speaker's sessions and the routers' tables.
type recovery struct {
	sp      *Speaker
	node    *netlab.Host
	routers map[string]netlab.Router
	prefix  netip.Prefix
	since   map[string]time.Time // each session's Established since, when last up
}

// up reports which sessions are Established (and since when, in r.since)
// with BFD up and their router holding the path.
func (r *recovery) up(ctx context.Context) (map[string]bool, error) {
	all, err := r.sp.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, st := range all {
		rt, ok := r.routers[st.Peer]
		if !ok || st.State != bgp.StateEstablished {
			continue
		}
		rib, err := rt.RIB(ctx)
		if err != nil {
			return nil, err
		}
		if len(rib[r.prefix]) > 0 {
			out[st.Peer] = true
			r.since[st.Peer] = st.Since
		}
	}
	return out, nil
}

// look is up for the watch loops, where a failed look is skipped.
func (r *recovery) look(ctx context.Context) (map[string]bool, bool) {
	up, err := r.up(ctx)
	return up, err == nil
}

func (r *recovery) ready(ctx context.Context, timeout time.Duration) error {
	r.since = map[string]time.Time{}
	// The conditions use the outer ctx: a call to the child cut off by the
	// poll's deadline would end the child.
	return netlab.Eventually(ctx, timeout, 50*time.Millisecond, func(context.Context) error {
		all, err := r.sp.Sessions(ctx)
		if err != nil {
			return err
		}
		for _, st := range all {
			if !st.BFDUp {
				return fmt.Errorf("session %s: BFD not up", st.Peer)
			}
		}
		up, err := r.up(ctx)
		if err != nil {
			return err
		}
		if len(up) != len(r.routers) {
			return fmt.Errorf("sessions up with the path: %v; all: %+v", up, all)
		}
		return nil
	})
}

// back waits until every session is a new one (Established after start)
// and its router holds the path, and returns for each how long after end.
func (r *recovery) back(ctx context.Context, start, end time.Time, timeout time.Duration) (map[string]time.Duration, error) {
	got := map[string]time.Duration{}
	err := netlab.Eventually(ctx, timeout, 20*time.Millisecond, func(context.Context) error {
		up, err := r.up(ctx)
		if err != nil {
			return err
		}
		now := time.Since(end)
		for name := range r.routers {
			if _, done := got[name]; !done && up[name] && r.since[name].After(start) {
				got[name] = now
			}
		}
		if len(got) != len(r.routers) {
			all, _ := r.sp.Sessions(ctx)
			return fmt.Errorf("back so far: %v; sessions %+v", got, all)
		}
		return nil
	})
	return got, err
}

// stable watches every session for d and returns those that went down (or
// whose router lost the path) meanwhile.
func (r *recovery) stable(ctx context.Context, d time.Duration) []string {
	want := map[string]time.Time{}
	for k, v := range r.since {
		want[k] = v
	}
	lost := map[string]bool{}
	_ = netlab.Consistently(ctx, d, 100*time.Millisecond, func(context.Context) error {
		up, ok := r.look(ctx)
		if !ok {
			return nil // a failed look (a router's CLI timing out) proves nothing
		}
		for name := range r.routers {
			if !up[name] || !r.since[name].Equal(want[name]) {
				lost[name] = true
			}
		}
		return nil
	})
	var out []string
	for _, name := range []string{PeerBIRD, PeerFRR} {
		if lost[name] {
			out = append(out, name)
		}
	}
	return out
}
