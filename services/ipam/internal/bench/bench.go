package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/replica"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// Config configures a run.
type Config struct {
	// Duration is how long each load is measured (default 5s).
	Duration time.Duration
	// Slice is the length of the windows in which raw etcd and Beacon take
	// turns (default 1s); see Run.
	Slice time.Duration
	// Warmup is how long each load runs before it is measured (default 1s).
	Warmup time.Duration
	// Concurrency lists the numbers of concurrent callers (default 1, 8, 64).
	Concurrency []int
	// CommitWorkers is the replica's replica.Options.CommitWorkers (0: its
	// default), for tuning experiments.
	CommitWorkers int
	// Only, if not empty, limits the run to these parts: "free" (the
	// free-address search), "plan" (the planner), "raw" and "beacon" (the
	// two sides of the load comparison; ratios need both), "raw3" and
	// "echo" (the references that explain the gap, see Run), "rawleader"
	// (raw etcd through the leader's endpoint only; a cluster only) and
	// "fanout".
	// For profiling one part alone.
	Only []string
	// EtcdCommand, if set, runs etcd in a child process: the command (a
	// program and its arguments) must run ServeEtcd with the directory
	// appended as its last argument. Nil embeds etcd in this process,
	// where its garbage collection and Beacon's share one heap.
	EtcdCommand []string
	// Cluster, if its Binary is set, runs the load against a cluster of
	// real etcd processes instead (the shape of a production IPAM, whose
	// replicas share an etcd cluster).
	Cluster EtcdCluster
	// Dial makes the replica reach an etcd embedded in this process over
	// loopback, as an external client would, instead of in process as
	// ipamd does (store.Embedded.Client); to measure what that saves.
	Dial bool
	// Suffix is appended to the name of every load figure, so that runs
	// against different etcds can be told apart ("_etcd3").
	Suffix string
	// Log receives progress, etcd's and the replica's warnings, and the
	// human tables (default io.Discard).
	Log io.Writer
}

// EtcdCluster is a cluster of etcd processes started for the run.
type EtcdCluster struct {
	// Binary is the etcd executable.
	Binary string
	// Members is the cluster's size (default 1).
	Members int
}

func (c *Config) defaults() {
	if c.Duration <= 0 {
		c.Duration = 5 * time.Second
	}
	if c.Slice <= 0 {
		c.Slice = time.Second
	}
	if c.Warmup <= 0 {
		c.Warmup = time.Second
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = []int{1, 8, 64}
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// runs reports whether part is to be measured.
func (c *Config) runs(part string) bool {
	return len(c.Only) == 0 || slices.Contains(c.Only, part)
}

// splitDuration splits d into n windows of about slice each (at least one).
func splitDuration(d, slice time.Duration) (n int, each time.Duration) {
	n = max(1, int((d+slice/2)/slice))
	return n, d / time.Duration(n)
}

// target is one side of the comparison.
type target struct {
	name string
	op   func(run string) opFunc
}

// Run measures every figure and returns them in a stable order.
//
// For each concurrency, raw etcd and Beacon are each measured for Duration
// in turns of about Slice, alternating which goes first, after a warm-up
// of their own; so both see the same etcd (ever fuller, compacting,
// flushing) and the same noise from the rest of the machine, and their
// ratio is fair even when the absolute figures drift.
func Run(ctx context.Context, cfg Config) (figs []Figure, err error) {
	cfg.defaults()
	log := cfg.Log
	for _, c := range cfg.Concurrency {
		if c < 1 {
			return nil, fmt.Errorf("concurrency %d: must be at least 1", c)
		}
	}
	logLoad(log, "start")

	// In-memory figures first, while no etcd competes for the CPU.
	var free []Figure
	if cfg.runs("free") {
		fmt.Fprintln(log, "== free-address search (testing.Benchmark)")
		if free, err = freeSearch(log); err != nil {
			return nil, err
		}
	}
	if cfg.runs("plan") {
		fmt.Fprintln(log, "== planner (testing.Benchmark)")
		plans, err := planBench(log)
		if err != nil {
			return nil, err
		}
		free = append(free, plans...)
	}

	etcdLog := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	env, err := startEtcd(ctx, cfg.EtcdCommand, cfg.Cluster, cfg.Dial, cfg.runs("rawleader"), etcdLog)
	if err != nil {
		return nil, err
	}
	defer func() {
		fmt.Fprintln(log, "== stopping etcd")
		err = errors.Join(err, env.close())
	}()
	where := "in this process"
	switch {
	case cfg.Cluster.Binary != "":
		where = fmt.Sprintf("as a cluster of %d processes of %s", max(cfg.Cluster.Members, 1), cfg.Cluster.Binary)
	case cfg.EtcdCommand != nil:
		where = "in a child process"
	}
	reach := "in process"
	if env.replica == env.client {
		reach = "over loopback"
	}
	fmt.Fprintf(log, "== etcd %s, data in %s (fsync on), client %v, replica %s\n", where, env.dir, env.endpoints, reach)
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	node, err := startBeacon(ctx, env.replica, logger, replica.Options{CommitWorkers: cfg.CommitWorkers})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, node.stop()) }()

	var targets []target
	if cfg.runs("raw") {
		targets = append(targets, target{"raw", func(run string) opFunc { return rawOp(env.client.Etcd(), "/bench/raw/"+run+"/") }})
	}
	if cfg.runs("beacon") {
		targets = append(targets, target{"beacon", node.allocOp})
	}
	if cfg.runs("rawleader") && env.leader != nil {
		targets = append(targets, target{"rawleader", func(run string) opFunc { return rawOp(env.leader.Etcd(), "/bench/rawleader/"+run+"/") }})
	}
	if cfg.runs("raw3") {
		lease, err := env.client.Etcd().Grant(ctx, 3600)
		if err != nil {
			return nil, fmt.Errorf("grant the raw3 lease: %w", err)
		}
		targets = append(targets, target{"raw3", func(run string) opFunc { return raw3Op(env.client.Etcd(), "/bench/raw3/"+run+"/", lease.ID) }})
	}
	if cfg.runs("echo") {
		targets = append(targets, target{"echo", node.echoOp})
	}
	n, slice := splitDuration(cfg.Duration, cfg.Slice)
	stats := make(map[string]map[int]Stats)
	for _, t := range targets {
		stats[t.name] = make(map[int]Stats)
	}
	var rows []tableRow
	turn := 0
	for _, c := range cfg.Concurrency {
		fmt.Fprintf(log, "-- c=%d: %d targets, %d turns of %v each\n", c, len(targets), n, slice)
		got := make([]sample, len(targets))
		for round := range n {
			for k := range targets {
				i := (k + turn) % len(targets)
				t := targets[i]
				warmup := time.Duration(0)
				if round == 0 {
					warmup = cfg.Warmup
				}
				rev0, err := env.revision(ctx)
				if err != nil {
					return nil, err
				}
				s, err := runLoad(ctx, c, warmup, slice, t.op(fmt.Sprintf("c%d-r%d", c, round)))
				if err != nil {
					return nil, fmt.Errorf("%s c=%d: %w", t.name, c, err)
				}
				rev1, err := env.revision(ctx)
				if err != nil {
					return nil, err
				}
				s.txns = rev1 - rev0
				got[i].add(s)
			}
			turn++
		}
		for i, t := range targets {
			s := got[i].stats()
			stats[t.name][c] = s
			rows = append(rows, tableRow{t.name, c, s})
		}
	}
	var fan []Figure
	if cfg.runs("fanout") {
		fmt.Fprintln(log, "== fan-out to 1,000 subscribed announcers")
		client := env.replica
		if len(env.endpoints) > 1 {
			// A client of its own: the load's replica, still running, has
			// its Store following the cluster's leader on env.replica.
			if client, err = store.Dial(ctx, store.DialConfig{Endpoints: env.endpoints}); err != nil {
				return nil, err
			}
			defer func() { _ = client.Close() }()
		}
		if fan, err = fanout(ctx, client, log); err != nil {
			return nil, err
		}
	}
	logLoad(log, "end")
	fmt.Fprintln(log, "== results")
	writeTable(log, rows)
	if cfg.runs("raw") && cfg.runs("beacon") {
		figs = loadFigures(cfg.Concurrency, stats["raw"], stats["beacon"])
	}
	figs = append(figs, referenceFigures(cfg.Concurrency, stats)...)
	for i := range figs {
		figs[i].Name += cfg.Suffix
	}
	figs = append(figs, free...)
	return append(figs, fan...), nil
}

// referenceFigures are the figures of the references that decompose the
// gap between Beacon and raw etcd: etcd alone committing the writes of one
// allocation (raw3), a gRPC round trip that does nothing (echo), and raw
// etcd through the leader only (rawleader).
func referenceFigures(cs []int, stats map[string]map[int]Stats) []Figure {
	var figs []Figure
	for _, c := range cs {
		if r3, ok := stats["raw3"][c]; ok {
			figs = append(figs, Figure{fmt.Sprintf("raw_etcd_txn3_c%d", c), r3.OpsPerSec(), UnitOpsPerSec})
			if raw, ok := stats["raw"][c]; ok {
				figs = append(figs, Figure{fmt.Sprintf("raw_etcd_txn3_ratio_c%d", c), ratio(r3.OpsPerSec(), raw.OpsPerSec()), UnitRatio})
			}
		}
	}
	for _, c := range cs {
		if rl, ok := stats["rawleader"][c]; ok {
			figs = append(figs, Figure{fmt.Sprintf("raw_etcd_leader_txn_c%d", c), rl.OpsPerSec(), UnitOpsPerSec})
			if b, ok := stats["beacon"][c]; ok {
				figs = append(figs, Figure{fmt.Sprintf("alloc_throughput_ratio_leader_c%d", c), ratio(b.OpsPerSec(), rl.OpsPerSec()), UnitRatio})
			}
		}
	}
	if rl, ok := stats["rawleader"][1]; ok {
		if b, ok := stats["beacon"][1]; ok {
			figs = append(figs, Figure{"alloc_p50_latency_ratio_leader_c1", ratio(float64(b.P50), float64(rl.P50)), UnitRatio})
		}
	}
	if r3, ok := stats["raw3"][1]; ok {
		figs = append(figs, Figure{"raw_etcd_txn3_p50_latency_c1", micros(r3.P50), UnitMicros})
	}
	if e, ok := stats["echo"][1]; ok {
		figs = append(figs, Figure{"grpc_echo_p50_latency_c1", micros(e.P50), UnitMicros})
	}
	return figs
}

// logLoad logs the machine's load average, which explains noisy figures
// on a shared machine (Linux only; silent elsewhere).
func logLoad(log io.Writer, when string) {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(log, "load average at %s: %s\n", when, strings.TrimSpace(string(b)))
	}
}

// loadFigures derives the load figures from the measurements.
func loadFigures(cs []int, raw, beacon map[int]Stats) []Figure {
	var figs []Figure
	for _, c := range cs {
		figs = append(figs,
			Figure{fmt.Sprintf("alloc_throughput_c%d", c), beacon[c].OpsPerSec(), UnitOpsPerSec},
			Figure{fmt.Sprintf("raw_etcd_txn_c%d", c), raw[c].OpsPerSec(), UnitOpsPerSec},
			Figure{fmt.Sprintf("alloc_throughput_ratio_c%d", c), ratio(beacon[c].OpsPerSec(), raw[c].OpsPerSec()), UnitRatio},
		)
	}
	if b, ok := beacon[1]; ok {
		figs = append(figs,
			Figure{"alloc_p50_latency_c1", micros(b.P50), UnitMicros},
			Figure{"alloc_p50_latency_ratio_c1", ratio(float64(b.P50), float64(raw[1].P50)), UnitRatio},
		)
	}
	if b, ok := beacon[64]; ok {
		figs = append(figs, Figure{"alloc_p99_latency_c64", micros(b.P99), UnitMicros})
	}
	return figs
}
