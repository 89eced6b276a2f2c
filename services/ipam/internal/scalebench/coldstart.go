package scalebench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/bench"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// Units of the cold-start figures.
const (
	unitSeconds = "s"
	unitMillis  = "ms"
)

// coldSizes are the numbers of stored allocations the cold start is
// measured at, after coldReference (where only the list pages are the
// figure: the reference a large store's pages are compared with).
func coldSizes(quick bool) []int {
	if quick {
		return []int{10_000, 30_000, 100_000}
	}
	return []int{100_000, 300_000, 1_000_000}
}

const coldReference = 1_000

// coldRow is one size's measurements.
type coldRow struct {
	size      int
	start     time.Duration // median exec → first Allocate answered
	starts    []time.Duration
	cpu       time.Duration // ipamd's CPU time by then (median)
	rss       float64       // MiB, median, right after that answer
	peak      float64       // MiB, median of VmHWM then: the most resident while loading
	listP99   time.Duration
	listP50   time.Duration
	listPages int
	rareP99   time.Duration // pages of the rare filter's walk
	rarePages int
	// The same with Config.IPAMDBefore (zero without it).
	beforeP99, beforeP50, beforeRareP99 time.Duration
	dbSize                              int64
	dbSizeUsed                          int64
}

// coldStart measures, at each size, a replica's cold start (the real ipamd
// binary against an etcd embedded in this process, as replicas share an
// etcd cluster: exec → first Allocate answered, median of the trials), its
// resident memory then, and the p99 of ListAllocations pages, with the
// pages at coldReference allocations as the reference, in the same run.
//
//	BENCH scale_cold_start_<size>_s      exec → first Allocate answered (median)
//	BENCH scale_cold_start_cpu_<size>_s  ipamd's CPU time (user+system) by then (median)
//	BENCH scale_rss_<size>_mib           ipamd's VmRSS right after that answer (median)
//	BENCH scale_rss_peak_<size>_mib      ipamd's VmHWM then, its peak while loading (median)
//	BENCH scale_list_page_p99_<size>_ms  p99 of ListAllocations pages of 100 (1k: the reference)
//	BENCH scale_list_page_p99_ms         the same at the largest size
//	BENCH scale_list_page_p99_ratio      largest size's p99 over the reference's
//	BENCH scale_list_rare_page_p99_<size>_ms  p99 of the pages of a walk with a filter matching 1 in 10,000
//
// With Config.IPAMDBefore, that binary's cold starts are measured too, at
// each size just before IPAMD's (their table is printed, not BENCH lines),
// and the list figures again with "_before" (and
// scale_list_page_p99_ratio_before): that binary's pages, timed
// alternately with IPAMD's at each size.
func coldStart(ctx context.Context, cfg Config) (figs []bench.Figure, err error) {
	if cfg.IPAMD == "" {
		return nil, errors.New("coldstart needs --ipamd")
	}
	trials := 3
	if cfg.Quick {
		trials = 1
	}
	dir, err := os.MkdirTemp("", "ipam-scale-cold-")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	etcdLog := slog.New(slog.NewTextHandler(cfg.Log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: dir, ClientURL: "http://127.0.0.1:0", Logger: etcdLog, QuotaBytes: 8 << 30})
	if err != nil {
		return nil, err
	}
	defer emb.Close()
	endpoint := strings.Join(emb.Endpoints(), ",")
	client, err := store.Dial(ctx, store.DialConfig{Endpoints: emb.Endpoints()})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, client.Close()) }()
	fmt.Fprintf(cfg.Log, "cold start: ipamd %s against etcd at %s (in this process, fsync on)\n", cfg.IPAMD, endpoint)

	// The tenants, pools, nodes and peers, through the API.
	d, err := bench.StartIPAMD(cfg.IPAMD, endpoint)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := coldSetup(ctx, clientsOf(d)); err != nil {
		return nil, errors.Join(err, d.Stop())
	}
	if err := d.Stop(); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Log, "created %d tenants, %d pools, %d nodes, %d peers in %v\n", coldTenants, coldPools, coldTenants*coldNodesPer, coldTenants*coldPeersPer, time.Since(t0).Round(time.Millisecond))

	st, stopStore := runStore(ctx, client, cfg.Log)
	filler := &coldFiller{st: st, now: time.Now().UTC(), distinctLabels: cfg.DistinctLabels}
	var rows, before []coldRow
	for _, size := range append([]int{coldReference}, coldSizes(cfg.Quick)...) {
		if err := filler.fillTo(ctx, size, cfg.Log); err != nil {
			return nil, errors.Join(err, stopStore())
		}
		b := coldRow{size: size}
		if cfg.IPAMDBefore != "" {
			if err := coldStarts(ctx, cfg, cfg.IPAMDBefore, endpoint, trials, &b); err != nil {
				return nil, errors.Join(err, stopStore())
			}
		}
		row, err := coldMeasure(ctx, cfg, client, endpoint, size, trials)
		if err != nil {
			return nil, errors.Join(err, stopStore())
		}
		rows = append(rows, row)
		if cfg.IPAMDBefore != "" {
			b.dbSize, b.dbSizeUsed = row.dbSize, row.dbSizeUsed
			b.listP50, b.listP99, b.rareP99 = row.beforeP50, row.beforeP99, row.beforeRareP99
			before = append(before, b)
		}
	}
	if err := stopStore(); err != nil {
		return nil, err
	}
	if len(before) > 0 {
		fmt.Fprintf(cfg.Log, "\n%s (--ipamd-before), cold starts measured just before %s's at each size:\n", cfg.IPAMDBefore, cfg.IPAMD)
		coldTable(Config{Log: cfg.Log}, before)
		fmt.Fprintf(cfg.Log, "%s:\n", cfg.IPAMD)
	}
	coldTable(cfg, rows)

	ref, last := rows[0], rows[len(rows)-1]
	for i, r := range rows {
		n := sizeName(r.size)
		if i > 0 {
			figs = append(figs,
				bench.Figure{Name: "scale_cold_start_" + n + "_s", Value: r.start.Seconds(), Unit: unitSeconds},
				bench.Figure{Name: "scale_cold_start_cpu_" + n + "_s", Value: r.cpu.Seconds(), Unit: unitSeconds},
				bench.Figure{Name: "scale_rss_" + n + "_mib", Value: r.rss, Unit: bench.UnitMiB},
				bench.Figure{Name: "scale_rss_peak_" + n + "_mib", Value: r.peak, Unit: bench.UnitMiB},
			)
		}
		figs = append(figs,
			bench.Figure{Name: "scale_list_page_p99_" + n + "_ms", Value: millis(r.listP99), Unit: unitMillis},
			bench.Figure{Name: "scale_list_rare_page_p99_" + n + "_ms", Value: millis(r.rareP99), Unit: unitMillis},
		)
		if cfg.IPAMDBefore != "" {
			figs = append(figs,
				bench.Figure{Name: "scale_list_page_p99_" + n + "_before_ms", Value: millis(r.beforeP99), Unit: unitMillis},
				bench.Figure{Name: "scale_list_rare_page_p99_" + n + "_before_ms", Value: millis(r.beforeRareP99), Unit: unitMillis},
			)
		}
	}
	figs = append(figs,
		bench.Figure{Name: "scale_list_page_p99_ms", Value: millis(last.listP99), Unit: unitMillis},
		bench.Figure{Name: "scale_list_page_p99_ratio", Value: float64(last.listP99) / float64(max(ref.listP99, time.Microsecond)), Unit: bench.UnitRatio},
	)
	if cfg.IPAMDBefore != "" {
		figs = append(figs, bench.Figure{Name: "scale_list_page_p99_ratio_before", Value: float64(last.beforeP99) / float64(max(ref.beforeP99, time.Microsecond)), Unit: bench.UnitRatio})
	}
	return figs, nil
}

// coldMeasure measures one size: trials cold starts, then the list pages
// on a replica started once more.
func coldMeasure(ctx context.Context, cfg Config, client *store.Client, endpoint string, size, trials int) (coldRow, error) {
	row := coldRow{size: size}
	if h, err := client.Health(ctx); err == nil && len(h.Members) > 0 {
		row.dbSize, row.dbSizeUsed = h.Members[0].DBSize, h.Members[0].DBSizeInUse
	}
	if err := coldStarts(ctx, cfg, cfg.IPAMD, endpoint, trials, &row); err != nil {
		return row, err
	}

	// The list pages: with Config.IPAMDBefore too, alternately, twice each.
	type binary struct {
		path      string
		lat, rare []time.Duration
	}
	after := &binary{path: cfg.IPAMD}
	order := []*binary{after}
	var before *binary
	if cfg.IPAMDBefore != "" {
		before = &binary{path: cfg.IPAMDBefore}
		order = []*binary{before, after, before, after}
	}
	for _, b := range order {
		lat, rare, quiet, err := listOn(ctx, b.path, endpoint)
		if err != nil {
			return row, err
		}
		fmt.Fprintf(cfg.Log, "%s stored: %s quiet %v after it served (CPU under 10%% of a core over 1 s; at most 60 s)\n", sizeName(size), b.path, quiet.Round(100*time.Millisecond))
		b.lat, b.rare = append(b.lat, lat...), append(b.rare, rare...)
	}
	if before != nil {
		slices.Sort(before.lat)
		slices.Sort(before.rare)
		row.beforeP99, row.beforeP50 = bench.Percentile(before.lat, 99), bench.Percentile(before.lat, 50)
		row.beforeRareP99 = bench.Percentile(before.rare, 99)
		fmt.Fprintf(cfg.Log, "%s stored, before (%s): %d list pages, p50 %v, p99 %v; rare filter: %d pages, p99 %v\n", sizeName(size), before.path,
			len(before.lat), row.beforeP50.Round(time.Microsecond), row.beforeP99.Round(time.Microsecond), len(before.rare), row.beforeRareP99.Round(time.Microsecond))
	}
	slices.Sort(after.lat)
	slices.Sort(after.rare)
	row.listP99, row.listP50, row.listPages = bench.Percentile(after.lat, 99), bench.Percentile(after.lat, 50), len(after.lat)
	row.rareP99, row.rarePages = bench.Percentile(after.rare, 99), len(after.rare)
	fmt.Fprintf(cfg.Log, "%s stored: %d list pages, p50 %v, p99 %v; rare filter: %d pages, p99 %v\n", sizeName(size), len(after.lat),
		row.listP50.Round(time.Microsecond), row.listP99.Round(time.Microsecond), row.rarePages, row.rareP99.Round(time.Microsecond))
	return row, nil
}

// coldStarts measures trials cold starts of the ipamd binary at row.size
// and records their medians in row.
func coldStarts(ctx context.Context, cfg Config, ipamd, endpoint string, trials int, row *coldRow) error {
	var rss, peak []float64
	var cpu []time.Duration
	for i := range trials {
		var r bench.ColdStartResult
		var err error
		for try := range portTries {
			r, err = bench.ColdStartOnce(ctx, ipamd, endpoint, fmt.Sprintf("%s-%d-%d", sizeName(row.size), i, try))
			if !portTaken(err) {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("cold start at %d: %w", row.size, err)
		}
		fmt.Fprintf(cfg.Log, "%s stored: %s cold start #%d %v (ipamd CPU %v), VmRSS %.0f MiB, VmHWM %.0f MiB\n", sizeName(row.size), ipamd, i+1, r.Took.Round(time.Millisecond), r.CPU, r.RSSMiB, r.PeakMiB)
		row.starts, rss, cpu, peak = append(row.starts, r.Took), append(rss, r.RSSMiB), append(cpu, r.CPU), append(peak, r.PeakMiB)
	}
	row.cpu = slices.Sorted(slices.Values(cpu))[len(cpu)/2]
	row.start = slices.Sorted(slices.Values(row.starts))[len(row.starts)/2]
	row.rss = slices.Sorted(slices.Values(rss))[len(rss)/2]
	row.peak = slices.Sorted(slices.Values(peak))[len(peak)/2]
	return nil
}

// listOn starts the ipamd binary once more, waits until it serves and has
// gone quiet (see settle), and times its list pages (see listPages).
func listOn(ctx context.Context, ipamd, endpoint string) (lat, rare []time.Duration, quiet time.Duration, err error) {
	for try := range portTries {
		d, err := bench.StartIPAMD(ipamd, endpoint)
		if err != nil {
			return nil, nil, 0, err
		}
		lctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-d.Exited():
				cancel()
			case <-lctx.Done():
			}
		}()
		allocs := clientsOf(d).allocs
		_, err = allocs.ListAllocations(lctx, &ipamv1.ListAllocationsRequest{Parent: "tenants/-", PageSize: 1}) // waits for the replica
		if err == nil {
			quiet, err = settle(lctx, d)
		}
		if err == nil {
			lat, rare, err = listPages(lctx, allocs)
		}
		cancel()
		err = errors.Join(err, d.Stop())
		if err == nil {
			return lat, rare, quiet, nil
		}
		if !portTaken(err) || try == portTries-1 {
			return nil, nil, 0, err
		}
	}
	return nil, nil, 0, nil
}

// settle waits until the ipamd's CPU use over a second falls under a tenth
// of a core, or 60 s have passed: a replica that has just loaded its state
// still builds its plans and returns the load's garbage for a while, and
// the pages are timed on a replica at rest, as most pages are served. It
// returns how long it waited.
func settle(ctx context.Context, d *bench.IPAMD) (time.Duration, error) {
	const window, quiet, most = time.Second, 100 * time.Millisecond, 60 * time.Second
	last, err := d.CPU()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	for time.Since(t0) < most {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(window):
		}
		now, err := d.CPU()
		if err != nil {
			return 0, err
		}
		if now-last < quiet {
			break
		}
		last = now
	}
	return time.Since(t0), nil
}

// coldRareFilter selects one allocation in coldRareEvery.
const coldRareFilter = `labels.tier = "canary"`

// listTimed is how many pages listPages times per walk: walks start again
// from their first page until they have, so that every size has as many
// (at 1k a walk has 10 pages) and a p99 is not the slowest page or two.
const listTimed = 300

// listPages times pages of 100 of ListAllocations, walking with page
// tokens: every tenant's (parent tenants/-), one tenant's, and one
// tenant's in one pool (a filter matching a tenth of them), listTimed
// pages each; and apart, rare, every tenant's with a filter matching one
// allocation in coldRareEvery (whose pages may be short: the figure is a
// page's cost), 40 pages. The first call of each walk is left out.
func listPages(ctx context.Context, allocs ipamv1.AllocationServiceClient) (lat, rare []time.Duration, err error) {
	walks := []*ipamv1.ListAllocationsRequest{
		{Parent: "tenants/-", PageSize: 100},
		{Parent: "tenants/" + coldTenantID(7), PageSize: 100},
		{Parent: "tenants/" + coldTenantID(42), PageSize: 100, Filter: `pool = "` + coldPoolID(3) + `"`},
		{Parent: "tenants/-", PageSize: 100, Filter: coldRareFilter},
	}
	for w, req := range walks {
		if _, err := allocs.ListAllocations(ctx, req); err != nil { // warm up
			return nil, nil, fmt.Errorf("list %v: %w", req, err)
		}
		timed := listTimed
		if w == len(walks)-1 {
			timed = 40
		}
		token := ""
		for range timed {
			req.PageToken = token
			t0 := time.Now()
			resp, err := allocs.ListAllocations(ctx, req)
			if err != nil {
				return nil, nil, fmt.Errorf("list %v: %w", req, err)
			}
			if w == len(walks)-1 {
				rare = append(rare, time.Since(t0))
			} else {
				lat = append(lat, time.Since(t0))
			}
			token = resp.GetNextPageToken() // "": the walk starts again
		}
	}
	return lat, rare, nil
}

// coldTable logs the growth table.
func coldTable(cfg Config, rows []coldRow) {
	fmt.Fprintf(cfg.Log, "\n| allocations | cold start (median; all) | per 100k | ipamd CPU | per 100k | VmRSS | per 100k | VmHWM (peak) | list p50 | list p99 | rare filter p99 | etcd DB (in use) |\n")
	fmt.Fprintf(cfg.Log, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		var all []string
		for _, s := range r.starts {
			all = append(all, strconv.FormatFloat(s.Seconds(), 'f', 1, 64))
		}
		per := float64(r.size) / 100_000
		fmt.Fprintf(cfg.Log, "| %s | %.1f s (%s) | %.2f s | %.1f s | %.2f s | %.0f MiB | %.0f MiB | %.0f MiB | %.1f ms | %.1f ms | %.1f ms | %.0f MiB (%.0f MiB) |\n",
			sizeName(r.size), r.start.Seconds(), strings.Join(all, ", "), r.start.Seconds()/per, r.cpu.Seconds(), r.cpu.Seconds()/per, r.rss, r.rss/per, r.peak,
			millis(r.listP50), millis(r.listP99), millis(r.rareP99), float64(r.dbSize)/(1<<20), float64(r.dbSizeUsed)/(1<<20))
	}
	if cfg.IPAMDBefore != "" {
		fmt.Fprintf(cfg.Log, "\nList pages, the same run, alternating (before: %s):\n\n", cfg.IPAMDBefore)
		fmt.Fprintf(cfg.Log, "| allocations | p50 before | p50 | p99 before | p99 | rare filter p99 before | rare filter p99 |\n| --- | --- | --- | --- | --- | --- | --- |\n")
		for _, r := range rows {
			fmt.Fprintf(cfg.Log, "| %s | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.1f ms |\n", sizeName(r.size),
				millis(r.beforeP50), millis(r.listP50), millis(r.beforeP99), millis(r.listP99), millis(r.beforeRareP99), millis(r.rareP99))
		}
	}
	fmt.Fprintln(cfg.Log)
}

// portTries is how many times an ipamd is started when the port picked for
// it was taken by another process before it could listen (the machine is
// shared).
const portTries = 3

func portTaken(err error) bool {
	return err != nil && strings.Contains(err.Error(), "address already in use")
}

func clientsOf(d *bench.IPAMD) ipamClients {
	c := d.Conn()
	return ipamClients{
		pools: ipamv1.NewPoolServiceClient(c), tenants: ipamv1.NewTenantServiceClient(c),
		announce: ipamv1.NewAnnouncementServiceClient(c), allocs: ipamv1.NewAllocationServiceClient(c),
	}
}

// sizeName names a size in figure names: 1000 → "1k", 1000000 → "1m".
func sizeName(n int) string {
	switch {
	case n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "m"
	case n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
