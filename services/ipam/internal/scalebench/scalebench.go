package scalebench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/bench"
)

// Config configures a run.
type Config struct {
	// IPAMD is the ipamd binary, for the parts that start replicas as
	// processes.
	IPAMD string
	// IPAMDBefore, if set, is another ipamd binary (the one before a
	// change): coldstart measures its cold starts too, at each size just
	// before IPAMD's, against the same state (their table is printed, not
	// BENCH lines), and times its list pages alternately with IPAMD's, so
	// that both are measured under the same load.
	IPAMDBefore string
	// DistinctLabels gives every allocation of the cold start an owner
	// label set of its own (app=its name) instead of one of 350 repeating
	// sets: a replica shares the maps of equal sets only.
	DistinctLabels bool
	// Etcd is the etcd binary, for the parts that run a 3-member etcd
	// cluster; empty embeds etcd.
	Etcd string
	// Only, if not empty, limits the run to these parts (see Parts).
	Only []string
	// Quick runs each part at its smallest sizes only, to check that it
	// works (minutes instead of tens of minutes).
	Quick bool
	// PlanSize, if not empty, is the plan part's only size, as
	// TENANTSxALLOCATIONSxNODES (allocations and nodes per tenant), e.g.
	// 1x100000x300 for one very large tenant.
	PlanSize string
	// PlanNoFeed skips the plan part's feed phase (gRPC subscribers), whose
	// snapshots dominate at one very large tenant's size.
	PlanNoFeed bool
	// ReconnectSizes, if set, are the only sizes the reconnect part runs
	// (announcers).
	ReconnectSizes []int
	// Log receives progress and the human tables (default io.Discard).
	Log io.Writer
}

// part is one scale benchmark: it measures its own figures at its own sizes.
type part struct {
	name string
	run  func(ctx context.Context, cfg Config) ([]bench.Figure, error)
}

// parts lists every part in the order they run.
func parts() []part {
	return []part{
		{"plan", planChange},     // scale_plan_change_cpu_ms, scale_feed_p99_ms
		{"l2move", l2Moves},      // scale_l2_move_10000_ms
		{"reconnect", reconnect}, // scale_reconnect_3000_s
		{"coldstart", coldStart}, // scale_cold_start_1m_s, scale_rss_1m_mib, scale_list_page_p99_ms
	}
}

// Parts returns the names of the parts, for --only.
func Parts() []string {
	var names []string
	for _, p := range parts() {
		names = append(names, p.name)
	}
	return names
}

// Run runs every part (or those in cfg.Only) and returns their figures.
func Run(ctx context.Context, cfg Config) ([]bench.Figure, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	for _, o := range cfg.Only {
		if !slices.Contains(Parts(), o) {
			return nil, fmt.Errorf("unknown part %q (parts: %v)", o, Parts())
		}
	}
	if _, err := planSizes(cfg); err != nil {
		return nil, err
	}
	var figs []bench.Figure
	for _, p := range parts() {
		if len(cfg.Only) > 0 && !slices.Contains(cfg.Only, p.name) {
			continue
		}
		start := time.Now()
		fmt.Fprintf(cfg.Log, "== %s\n", p.name)
		f, err := p.run(ctx, cfg)
		if err != nil {
			return figs, fmt.Errorf("%s: %w", p.name, err)
		}
		fmt.Fprintf(cfg.Log, "== %s done in %s\n", p.name, time.Since(start).Round(time.Second))
		figs = append(figs, f...)
	}
	return figs, nil
}
