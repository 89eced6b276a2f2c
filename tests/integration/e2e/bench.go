package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// BenchConfig sizes a Bench run.
type BenchConfig struct {
	Bin string
	// L2Trials is the number of trials of each L2 failover kind.
	L2Trials int
	// HangTrials is the number of hung-announcer trials (each waits for
	// the heartbeat watchdog, ~0.6 s, and a reconnect).
	HangTrials int
	// BFDTrials is the number of BFD withdrawal trials (each waits for the
	// session to come back, 2-8 s).
	BFDTrials int
	// StaleRounds is the number of rounds of StaleSilences (each about
	// 25 s): an owner frozen or cut off, and back after its addresses moved.
	StaleRounds int
	// RestartRounds is the number of rolling restarts of three IPAM
	// replicas (sharing an etcd started from EtcdBin) under subscribed
	// announcers, FRR and an L2 address (each round about 2 s).
	RestartRounds int
	// EtcdBin is the etcd binary for RestartRounds (see EtcdBinary).
	EtcdBin string
	// GlobalTrials is the number of trials of BenchGlobalWithdraw (each
	// under a second, plus the route coming back).
	GlobalTrials int
	// Log receives progress (nil: discarded).
	Log io.Writer
}

// Figure is one measured value: a time, or a count when Unit is "count".
type Figure struct {
	Name  string
	Value time.Duration
	Count int
	Unit  string // "" for ms
}

// Line is the figure as "BENCH <name> <value> ms" (or "... <n> count").
func (f Figure) Line() string {
	if f.Unit == "count" {
		return fmt.Sprintf("BENCH %s %d count", f.Name, f.Count)
	}
	return "BENCH " + f.Name + " " + Millis(f.Value) + " ms"
}

// Bench measures L2 failover (kill, link down, hang), drain and BFD
// withdrawal with the real binaries and returns p50 and p99 of each. It
// needs root.
//
// Link-down failover is measured in both topologies, since they differ by
// an order of magnitude: "sepmgmt", the nodes reach the IPAM over a
// management link of their own (the Cluster default), so the node reports
// its eth0 down and the IPAM moves the addresses at once; and "samelink",
// the nodes reach the IPAM over eth0 itself (Options.IPAMOverDataLink), so
// the addresses move only when the IPAM's heartbeat watchdog ends the
// silent node's session.
func Bench(ctx context.Context, cfg BenchConfig) ([]Figure, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	logf := func(format string, args ...any) { fmt.Fprintf(cfg.Log, format+"\n", args...) }
	var figs []Figure
	add := func(name string, s Samples) {
		logf("%s: %v", name, s)
		figs = append(figs, Figure{Name: name + "_p50", Value: s.Percentile(50)}, Figure{Name: name + "_p99", Value: s.Percentile(99)})
	}
	l2, err := benchL2(ctx, cfg, logf)
	for _, k := range []FailoverKind{Kill, LinkDown, Hang, Drain} {
		if s, ok := l2[k]; ok {
			name := "l2_failover_" + k.String()
			switch k {
			case Drain:
				name = "l2_drain_outage"
			case LinkDown:
				name += "_sepmgmt"
			}
			add(name, s)
		}
	}
	if err != nil {
		return figs, err
	}
	same, err := benchSameLink(ctx, cfg, logf)
	if len(same) > 0 {
		add("l2_failover_linkdown_samelink", same)
	}
	if err != nil {
		return figs, err
	}
	stale, err := benchStale(ctx, cfg, logf)
	figs = append(figs, stale...)
	if err != nil {
		return figs, err
	}
	bfd, err := benchBFD(ctx, cfg, logf)
	if len(bfd) > 0 {
		add("bgp_bfd_withdraw", bfd)
	}
	if err != nil {
		return figs, err
	}
	restart, err := benchRestart(ctx, cfg, logf)
	figs = append(figs, restart...)
	if err != nil || cfg.GlobalTrials <= 0 {
		return figs, err
	}
	global, local, err := BenchGlobalWithdraw(ctx, cfg.Bin, cfg.GlobalTrials, cfg.Log)
	if len(global) > 0 {
		add("global_withdraw_no_endpoints", global)
	}
	if len(local) > 0 {
		add("local_withdraw_no_endpoints", local)
	}
	return figs, err
}

func benchL2(ctx context.Context, cfg BenchConfig, logf func(string, ...any)) (out map[FailoverKind]Samples, err error) {
	if cfg.L2Trials <= 0 && cfg.HangTrials <= 0 {
		return nil, nil
	}
	c, err := New(ctx, Options{Bin: cfg.Bin, Nodes: 2, Logf: logf})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	svc, err := c.SetupL2(ctx)
	if err != nil {
		return nil, err
	}
	out = map[FailoverKind]Samples{}
	for _, k := range []FailoverKind{Kill, LinkDown, Hang, Drain} {
		n := cfg.L2Trials
		if k == Hang {
			n = cfg.HangTrials
		}
		if n <= 0 {
			continue
		}
		res, err := c.MeasureFailover(ctx, svc, k, n)
		if err != nil {
			return out, err
		}
		out[k] = Outages(res)
	}
	return out, nil
}

// benchSameLink measures link-down failover with the IPAM reached over the
// link that goes down.
func benchSameLink(ctx context.Context, cfg BenchConfig, logf func(string, ...any)) (s Samples, err error) {
	if cfg.L2Trials <= 0 {
		return nil, nil
	}
	c, err := New(ctx, Options{Bin: cfg.Bin, Nodes: 2, IPAMOverDataLink: true, Logf: logf})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	svc, err := c.SetupL2(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.MeasureFailover(ctx, svc, LinkDown, cfg.L2Trials)
	return Outages(res), err
}

func benchBFD(ctx context.Context, cfg BenchConfig, logf func(string, ...any)) (s Samples, err error) {
	if cfg.BFDTrials <= 0 {
		return nil, nil
	}
	c, err := New(ctx, Options{Bin: cfg.Bin, Nodes: 1, Logf: logf})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	frr, prefix, err := c.SetupBFD(ctx, 50*time.Millisecond, 3)
	if err != nil {
		return nil, err
	}
	mon, err := frr.Host().MonitorRoutes(ctx)
	if err != nil {
		return nil, err
	}
	return c.MeasureBFDWithdraw(ctx, frr, mon, c.Nodes[0], prefix, cfg.BFDTrials)
}
