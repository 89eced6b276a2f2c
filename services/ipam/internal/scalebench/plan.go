package scalebench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"slices"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/bench"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// The plan part: what one allocation change costs the IPAM (CPU, planning
// it incrementally, against planning the tenant in full as the reference),
// and how long it takes to reach every announcer it concerns.
//
// At each size, a fresh etcd holds `tenants` tenants of `allocs`
// allocations and `nodes` registered nodes each, written through the real
// store in batches. The measured tenant, t00, has L2 and BGP
// advertisements (half its allocations each, IPv6 with one in five
// dual-stack, a quarter of the L2 ones LOCAL with three endpoint nodes);
// the others announce over BGP only. Then:
//
//   - planning: a fleet (State and Hub, leading the L2 owners) fed by a
//     watch of the whole state, as a replica wires it, with every node of
//     t00 subscribed as an in-memory session; allocations and releases in
//     t00 written through the store, each waited for until every session
//     it concerns has it. The process's CPU time (user + system, not wall)
//     over those changes, per change: the figure. The reference is the CPU
//     of planning t00 in full (planner.L2Owners and Plans), what every
//     change cost before.
//   - feed: a replica serving gRPC on loopback, t00's nodes subscribed as
//     in-process gRPC clients over real connections; allocations through
//     the Allocate RPC, each timed from its commit until every subscriber
//     has its route.
type planSize struct {
	tenants, allocs, nodes int // allocs and nodes per tenant
}

func (s planSize) String() string {
	return fmt.Sprintf("%d x %d allocations, %d x %d nodes", s.tenants, s.allocs, s.tenants, s.nodes)
}

// planSizes are the sizes measured, smallest first; the BENCH lines are the
// largest's. cfg.PlanSize, when set, is the only one.
func planSizes(cfg Config) ([]planSize, error) {
	if cfg.PlanSize != "" {
		var sz planSize
		var rest string
		n, _ := fmt.Sscanf(cfg.PlanSize, "%dx%dx%d%s", &sz.tenants, &sz.allocs, &sz.nodes, &rest)
		if n != 3 || sz.tenants < 1 || sz.tenants > 100 || sz.allocs < 10 || sz.allocs > 1<<20 || sz.nodes < 1 || sz.nodes > 10000 {
			return nil, fmt.Errorf("plan size %q: want TENANTSxALLOCATIONSxNODES, 1-100 tenants of 10-1048576 allocations and 1-10000 nodes", cfg.PlanSize)
		}
		return []planSize{sz}, nil
	}
	if cfg.Quick {
		return []planSize{{100, 100, 10}, {100, 300, 20}, {100, 1000, 30}}, nil
	}
	return []planSize{{100, 100, 10}, {100, 1000, 30}, {100, 10000, 100}}, nil
}

// planRow is what one size measured.
type planRow struct {
	size     planSize
	load     time.Duration // writing the state
	changes  int
	cpu      time.Duration // per change, planned incrementally
	wall     time.Duration // per change, commit to every session
	full     time.Duration // CPU of planning t00 in full
	feedP50  time.Duration
	feedP99  time.Duration
	feedCPU  time.Duration // process CPU per change over gRPC
	routes   int           // routes in a node's plan
	l2Owners int
}

const planTenant = "t00"

// loadTimeout bounds the etcd calls that read the whole state.
const loadTimeout = 2 * time.Minute

func planChange(ctx context.Context, cfg Config) ([]bench.Figure, error) {
	sizes, err := planSizes(cfg)
	if err != nil {
		return nil, err
	}
	var rows []planRow
	for _, sz := range sizes {
		fmt.Fprintf(cfg.Log, "-- plan: %s\n", sz)
		row, err := planAt(ctx, cfg, sz)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sz, err)
		}
		rows = append(rows, row)
		if !cfg.PlanNoFeed {
			fmt.Fprintf(cfg.Log, "   feed: p50 %.1f ms, p99 %.1f ms, %.1f ms CPU per change\n", ms(row.feedP50), ms(row.feedP99), ms(row.feedCPU))
		}
	}
	etcd := "embedded (its CPU counted)"
	if cfg.Etcd != "" {
		etcd = "a separate process (its CPU not counted)"
	}
	fmt.Fprintf(cfg.Log, "\nplan changes and the feed (etcd %s):\n", etcd)
	tw := tabwriter.NewWriter(cfg.Log, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "allocations\tnodes\tt00 allocs\tt00 nodes\troutes/node\tload s\tchange CPU ms\tfull CPU ms\tchange wall ms\tfeed p50 ms\tfeed p99 ms\tfeed CPU ms\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%.1f\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n",
			r.size.tenants*r.size.allocs, r.size.tenants*r.size.nodes, r.size.allocs, r.size.nodes, r.routes,
			r.load.Seconds(), ms(r.cpu), ms(r.full), ms(r.wall), ms(r.feedP50), ms(r.feedP99), ms(r.feedCPU))
	}
	if err := tw.Flush(); err != nil {
		return nil, err
	}
	last := rows[len(rows)-1]
	figs := []bench.Figure{
		{Name: "scale_plan_change_cpu_ms", Value: ms(last.cpu), Unit: "ms"},
		{Name: "scale_plan_full_cpu_ms", Value: ms(last.full), Unit: "ms"},
	}
	if !cfg.PlanNoFeed {
		figs = append(figs, bench.Figure{Name: "scale_feed_p99_ms", Value: ms(last.feedP99), Unit: "ms"})
	}
	return figs, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// planAt measures one size on a fresh etcd.
func planAt(ctx context.Context, cfg Config, sz planSize) (row planRow, err error) {
	row.size = sz
	logger := slog.New(slog.NewTextHandler(cfg.Log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	client, stopEtcd, err := startPlanEtcd(ctx, cfg, logger)
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, stopEtcd()) }()

	start := time.Now()
	if err := loadPlanState(ctx, client, logger, sz); err != nil {
		return row, fmt.Errorf("load: %w", err)
	}
	row.load = time.Since(start)
	fmt.Fprintf(cfg.Log, "   loaded in %s\n", row.load.Round(time.Millisecond))
	runtime.GC()

	if err := measurePlanning(ctx, client, logger, sz, &row); err != nil {
		return row, fmt.Errorf("planning: %w", err)
	}
	fmt.Fprintf(cfg.Log, "   planning: %.2f ms CPU per change (%d changes), %.1f ms in full; %d routes per node, %d L2 owners\n",
		ms(row.cpu), row.changes, ms(row.full), row.routes, row.l2Owners)
	runtime.GC()
	if cfg.PlanNoFeed {
		return row, nil
	}
	if err := measureFeed(ctx, client, logger, sz, cfg.Quick, &row); err != nil {
		return row, fmt.Errorf("feed: %w", err)
	}
	return row, nil
}

func nodeName(i int) string { return fmt.Sprintf("n%04d", i) }

func tenantName(i int) string { return fmt.Sprintf("t%02d", i) }

// planNode is a registered node of a tenant: in racks of 20, every tenth
// an edge node.
func planNode(tenant string, i int) *ipam.Node {
	role := "worker"
	if i%10 == 0 {
		role = "edge"
	}
	return &ipam.Node{Tenant: tenant, Name: nodeName(i), Live: true,
		Labels:     map[string]string{"rack": fmt.Sprintf("r%02d", i/20), "role": role},
		Interfaces: []ipam.Interface{{Name: "eth0", Up: true}}}
}

// planAlloc is allocation j of tenant i (see the part's comment).
func planAlloc(i, j, nodes int) *ipam.Allocation {
	tenant := tenantName(i)
	mode := "bgp"
	if j%2 == 0 {
		mode = "l2"
	}
	a := &ipam.Allocation{Tenant: tenant, ID: fmt.Sprintf("a%06d", j), Owner: fmt.Sprintf("ns/svc-%d", j), Pool: "scale",
		OwnerLabels: selector.NewSet("mode", mode)}
	v6 := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(i), 0, 0, 0, 0, 0, 0, 0, byte(j >> 16), byte(j >> 8), byte(j)})
	a.Addrs = []netip.Addr{v6}
	if i == 0 && j%5 == 0 {
		a.Addrs = append(a.Addrs, netip.AddrFrom4([4]byte{198, 18, byte(j >> 8), byte(j)}))
	}
	if mode == "l2" && j%8 == 0 {
		a.TrafficPolicy = ipam.TrafficLocal
		for k := range 3 {
			a.EndpointNodes = append(a.EndpointNodes, nodeName((j*7+k*13)%nodes))
		}
	}
	return a
}

func ref(kind ipam.Kind, id string) ipam.Ref { return ipam.Ref{Kind: kind, ID: id} }

// loadPlanState writes the state of one size through the store.
func loadPlanState(ctx context.Context, client *store.Client, logger *slog.Logger, sz planSize) error {
	st := store.New(client, logger, store.Options{})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = st.Run(runCtx) // ends with the context
	}()
	defer func() { stop(); <-done }()

	scale, err := poolOf("scale", []string{"198.18.0.0/15", "2001:db8::/32"}, nil)
	if err != nil {
		return err
	}
	live, err := poolOf("live", []string{"198.51.100.0/24"}, []string{planTenant})
	if err != nil {
		return err
	}
	var puts []ipam.Put
	puts = append(puts,
		ipam.Put{Ref: ref(ipam.KindPool, "scale"), Value: scale},
		ipam.Put{Ref: ref(ipam.KindPool, "live"), Value: live})
	for i := range sz.tenants {
		t := tenantName(i)
		puts = append(puts,
			ipam.Put{Ref: ref(ipam.KindBGPPeer, t+"/r4"), Value: &ipam.BGPPeer{Tenant: t, ID: "r4", MyASN: 64500, PeerASN: 64500,
				PeerAddress: netip.MustParseAddr("203.0.113.1")}},
			ipam.Put{Ref: ref(ipam.KindBGPPeer, t+"/r6"), Value: &ipam.BGPPeer{Tenant: t, ID: "r6", MyASN: 64500, PeerASN: 65000,
				PeerAddress: netip.MustParseAddr("2001:db8:ffff::1")}},
			ipam.Put{Ref: ref(ipam.KindBGPAdvertisement, t+"/bgp"), Value: &ipam.BGPAdvertisement{Tenant: t, ID: "bgp",
				Pools: []string{"scale"}, OwnerSelectors: selectors("mode", "bgp"), Communities: []string{"64500:100"}}},
		)
		if i == 0 {
			puts = append(puts,
				ipam.Put{Ref: ref(ipam.KindL2Advertisement, t+"/l2"), Value: &ipam.L2Advertisement{Tenant: t, ID: "l2",
					Pools: []string{"scale"}, OwnerSelectors: selectors("mode", "l2"),
					NodePriorities: []ipam.NodePriority{{Priority: 1, Selector: selectors("rack", "r00")[0]}}}},
				ipam.Put{Ref: ref(ipam.KindBGPAdvertisement, t+"/live"), Value: &ipam.BGPAdvertisement{Tenant: t, ID: "live",
					Pools: []string{"live"}}},
			)
		}
		for j := range sz.nodes {
			n := planNode(t, j)
			puts = append(puts, ipam.Put{Ref: ref(ipam.KindNode, t+"/"+n.Name), Value: n})
		}
	}
	if err := commitAll(ctx, st, puts); err != nil {
		return err
	}
	// The allocations, tenant by tenant, in batches written by a few
	// writers at once.
	const writers = 4
	work := make(chan int)
	errs := make(chan error, writers)
	for range writers {
		go func() {
			var err error
			for i := range work {
				if err != nil {
					continue
				}
				var puts []ipam.Put
				for j := range sz.allocs {
					a := planAlloc(i, j, sz.nodes)
					puts = append(puts, ipam.Put{Ref: ref(ipam.KindAllocation, a.Tenant+"/"+a.ID), Value: a})
				}
				err = commitAll(ctx, st, puts)
			}
			errs <- err
		}()
	}
	for i := range sz.tenants {
		work <- i
	}
	close(work)
	var all []error
	for range writers {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// commitAll commits puts in batches of 128, etcd's default most operations
// in a transaction.
func commitAll(ctx context.Context, st *store.Store, puts []ipam.Put) error {
	for chunk := range slices.Chunk(puts, 128) {
		if _, _, err := st.Commit(ctx, ipam.Change{Puts: chunk}); err != nil {
			return err
		}
	}
	return nil
}
