package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/replica"
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
	// Log receives progress, etcd's and the replica's warnings, and the
	// human tables (default io.Discard).
	Log io.Writer
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
	fmt.Fprintln(log, "== free-address search (testing.Benchmark)")
	free, err := freeSearch(log)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(log, "== planner (testing.Benchmark)")
	plans, err := planBench(log)
	if err != nil {
		return nil, err
	}
	free = append(free, plans...)

	env, err := startEtcd(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		fmt.Fprintln(log, "== stopping etcd (its \"server closed\" errors while stopping are expected)")
		err = errors.Join(err, env.close())
	}()
	fmt.Fprintf(log, "== etcd embedded in %s (fsync on), client %v\n", env.dir, env.emb.Endpoints())
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	node, err := startBeacon(ctx, env.client, logger, replica.Options{CommitWorkers: cfg.CommitWorkers})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, node.stop()) }()

	targets := []target{
		{"raw", func(run string) opFunc { return rawOp(env.client, "/bench/raw/"+run+"/") }},
		{"beacon", node.allocOp},
	}
	n, slice := splitDuration(cfg.Duration, cfg.Slice)
	stats := map[string]map[int]Stats{"raw": {}, "beacon": {}}
	var rows []tableRow
	turn := 0
	for _, c := range cfg.Concurrency {
		fmt.Fprintf(log, "-- c=%d: raw etcd and Beacon, %d turns of %v each\n", c, n, slice)
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
	fmt.Fprintln(log, "== fan-out to 1,000 subscribed announcers")
	fan, err := fanout(ctx, env.client, log)
	if err != nil {
		return nil, err
	}
	logLoad(log, "end")
	fmt.Fprintln(log, "== results")
	writeTable(log, rows)
	figs = append(loadFigures(cfg.Concurrency, stats["raw"], stats["beacon"]), free...)
	return append(figs, fan...), nil
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
