package scalebench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/bench"
)

// The reconnect part: what a replica's death costs (scale_reconnect_N_s:
// how long until the announcers it served hold a confirmed plan again,
// with the snapshots sent, etcd lease grants and L2 owner or route changes
// counted); and the L2 move part: how fast a dead node's L2 addresses move
// (scale_l2_move_N_ms).

// reconnectHeartbeat is the replicas' heartbeat interval in this part
// (announcerd's default is 200 ms): the simulated announcers' heartbeats
// are load that has nothing to do with reconnecting.
const reconnectHeartbeat = time.Second

// nodesPerTenant: the announcers are spread over tenants of this size (a
// hundred clusters of a few hundred nodes, as issue #18 describes).
const nodesPerTenant = 300

func reconnect(ctx context.Context, cfg Config) ([]bench.Figure, error) {
	sizes := []int{300, 1000, 3000}
	if cfg.Quick {
		sizes = sizes[:1]
	}
	if len(cfg.ReconnectSizes) > 0 {
		sizes = cfg.ReconnectSizes
	}
	var figs []bench.Figure
	var rows []reconnectResult
	for _, n := range sizes {
		r, err := reconnectRun(ctx, cfg, n)
		if err != nil {
			fmt.Fprintf(cfg.Log, "   reconnect of %d: %v\n", n, err)
			continue
		}
		rows = append(rows, r)
		figs = append(figs,
			bench.Figure{Name: fmt.Sprintf("scale_reconnect_%d_s", n), Value: r.took.Seconds(), Unit: "s"},
			bench.Figure{Name: fmt.Sprintf("scale_reconnect_%d_snapshots", n), Value: float64(r.snapshots), Unit: "count"},
			bench.Figure{Name: fmt.Sprintf("scale_reconnect_%d_lease_grants", n), Value: float64(r.grants), Unit: "count"},
			bench.Figure{Name: fmt.Sprintf("scale_reconnect_%d_owner_changes", n), Value: float64(r.ownerChanges + r.routeChanges), Unit: "count"},
			bench.Figure{Name: fmt.Sprintf("scale_reconnect_%d_keepalives_per_s", n), Value: r.keepAlives, Unit: "1/s"},
		)
	}
	fmt.Fprintf(cfg.Log, "\n== reconnect: one of 3 replicas killed\n%10s %10s %10s %10s %10s %10s %10s %12s\n", "announcers", "affected", "current_s", "snapshots", "resumed", "grants", "changes", "keepalive/s")
	for _, r := range rows {
		fmt.Fprintf(cfg.Log, "%10d %10d %10.2f %10d %10d %10d %10d %12.1f\n", r.n, r.affected, r.took.Seconds(), r.snapshots, r.resumes, r.grants, r.ownerChanges+r.routeChanges, r.keepAlives)
	}
	if len(rows) < len(sizes) {
		return figs, fmt.Errorf("%d of %d reconnect sizes measured", len(rows), len(sizes))
	}
	return figs, nil
}

// l2Moves is the L2 move part (scale_l2_move_N_ms), a part of its own
// (--only l2move): it needs few announcers, and a reconnect size this
// machine cannot hold must not cost its figures.
func l2Moves(ctx context.Context, cfg Config) ([]bench.Figure, error) {
	moves := []int{1000, 3000, 10000}
	if cfg.Quick {
		moves = moves[:1]
	}
	var figs []bench.Figure
	var mrows []moveResult
	for _, m := range moves {
		r, err := l2MoveRun(ctx, cfg, m)
		if err != nil {
			fmt.Fprintf(cfg.Log, "   L2 move of %d: %v\n", m, err)
			continue
		}
		mrows = append(mrows, r)
		figs = append(figs, bench.Figure{Name: fmt.Sprintf("scale_l2_move_%d_ms", m), Value: ms(r.took), Unit: "ms"})
	}
	fmt.Fprintf(cfg.Log, "\n== L2 move: a node holding N addresses dies, 9 others take them\n%10s %10s %10s %10s\n", "addresses", "moved_ms", "p50_ms", "double")
	for _, r := range mrows {
		fmt.Fprintf(cfg.Log, "%10d %10.0f %10.0f %10d\n", r.n, ms(r.took), ms(r.p50), r.double)
	}
	if len(mrows) < len(moves) {
		return figs, fmt.Errorf("%d of %d L2 move sizes measured", len(mrows), len(moves))
	}
	return figs, nil
}

// fleetSetup creates the pools (an IPv6 one for L2, an IPv4 one for BGP)
// and, for each tenant, a BGP peer and the advertisements.
func fleetSetup(ctx context.Context, conn grpc.ClientConnInterface, tenants []string, l2Range string) error {
	pools := ipamv1.NewPoolServiceClient(conn)
	if _, err := pools.CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: "scale-l2", Pool: &ipamv1.Pool{Ranges: []string{l2Range}, Tenants: tenants}}); err != nil {
		return fmt.Errorf("l2 pool: %w", err)
	}
	if _, err := pools.CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: "scale-bgp", Pool: &ipamv1.Pool{Ranges: []string{"203.0.113.0/24"}, Tenants: tenants}}); err != nil {
		return fmt.Errorf("bgp pool: %w", err)
	}
	ann := ipamv1.NewAnnouncementServiceClient(conn)
	for _, t := range tenants {
		if _, err := ann.CreateBGPPeer(ctx, &ipamv1.CreateBGPPeerRequest{Parent: "tenants/" + t, BgpPeerId: "r1", BgpPeer: &ipamv1.BGPPeer{
			MyAsn: 64500, PeerAsn: 64501, PeerAddress: "198.51.100.1",
		}}); err != nil {
			return fmt.Errorf("peer: %w", err)
		}
		if _, err := ann.CreateBGPAdvertisement(ctx, &ipamv1.CreateBGPAdvertisementRequest{Parent: "tenants/" + t, BgpAdvertisementId: "bgp", BgpAdvertisement: &ipamv1.BGPAdvertisement{
			Pools: []string{"pools/scale-bgp"},
		}}); err != nil {
			return fmt.Errorf("bgp advertisement: %w", err)
		}
		if _, err := ann.CreateL2Advertisement(ctx, &ipamv1.CreateL2AdvertisementRequest{Parent: "tenants/" + t, L2AdvertisementId: "l2", L2Advertisement: &ipamv1.L2Advertisement{
			Pools: []string{"pools/scale-l2"},
		}}); err != nil {
			return fmt.Errorf("l2 advertisement: %w", err)
		}
	}
	return nil
}

// allocate makes count allocations from pool for tenant, 32 at a time.
func allocate(ctx context.Context, conn grpc.ClientConnInterface, tenant, pool string, count int) error {
	allocs := ipamv1.NewAllocationServiceClient(conn)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(count) {
					return
				}
				if _, err := allocs.Allocate(ctx, &ipamv1.AllocateRequest{Parent: "tenants/" + tenant, Allocation: &ipamv1.Allocation{
					Owner: fmt.Sprintf("%s-%d", pool, i), RequestedPool: "pools/" + pool,
				}}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// waitFor polls cond every 50 ms (and whenever an announcer's plan
// changes) until it holds, or fails after limit.
func waitFor(ctx context.Context, limit time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %w after %s", what, errTimeout, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// quiet waits until no announcer's plan changed for d.
func quiet(ctx context.Context, anns []*simAnnouncer, d time.Duration, limit time.Duration) error {
	sig := func() []int {
		out := make([]int, 0, len(anns))
		for _, a := range anns {
			s := a.state()
			out = append(out, len(s.l2)*1_000_003+s.routes*7+s.snapshots+s.resumes*13)
		}
		return out
	}
	last, since := sig(), time.Now()
	return waitFor(ctx, limit, "plans settling", func() bool {
		now := sig()
		if !slices.Equal(now, last) {
			last, since = now, time.Now()
		}
		return time.Since(since) >= d
	})
}

type reconnectResult struct {
	n, affected                int
	took                       time.Duration
	snapshots, resumes, grants int
	ownerChanges, routeChanges int
	// keepAlives is the lease keep-alives the replicas sent per second
	// with the fleet settled, before the kill.
	keepAlives float64
}

// keepAliveWindow is how long the keep-alives are counted for.
const keepAliveWindow = 5 * time.Second

// reconnectRun: n announcers over 3 replicas, each tenant's L2 addresses
// (one per node) and BGP routes (5 per tenant) spread over them; the
// replica serving a third of them is killed.
func reconnectRun(ctx context.Context, cfg Config, n int) (res reconnectResult, err error) {
	res.n = n
	fmt.Fprintf(cfg.Log, "-- reconnect: %d announcers\n", n)
	env, err := newFleetEnv(ctx, cfg, 3, reconnectHeartbeat)
	if err != nil {
		return res, err
	}
	defer env.close()
	conns, err := env.dialAll(max(n/300, 1))
	if err != nil {
		return res, err
	}
	admin := conns[1][0]
	tenantCount := max(n/nodesPerTenant, 1)
	var tenants []string
	for i := range tenantCount {
		tenants = append(tenants, fmt.Sprintf("cluster-%03d", i))
	}
	if err := fleetSetup(ctx, admin, tenants, "2001:db8:5ca1::/112"); err != nil {
		return res, err
	}
	start := time.Now()
	for _, t := range tenants {
		if err := allocate(ctx, admin, t, "scale-l2", n/tenantCount); err != nil {
			return res, err
		}
		if err := allocate(ctx, admin, t, "scale-bgp", 5); err != nil {
			return res, err
		}
	}
	fmt.Fprintf(cfg.Log, "   %d allocations in %s\n", n+5*tenantCount, time.Since(start).Round(time.Millisecond))

	actx, stopAnns := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopAnns(); wg.Wait() }()
	anns := make([]*simAnnouncer, n)
	// The fleet comes up over a few seconds (500 nodes a second), not in
	// one burst: what is measured is the reconnect, not a first start.
	for i := range anns {
		anns[i] = newSimAnnouncer(tenants[i%tenantCount], fmt.Sprintf("node-%05d", i), conns, i%len(conns))
		wg.Go(func() { anns[i].run(actx) })
		time.Sleep(2 * time.Millisecond)
	}
	start = time.Now()
	wantL2 := n / tenantCount * tenantCount
	lastLog := time.Now()
	if err := waitFor(ctx, 10*time.Minute, "announcers subscribed with every address owned", func() bool {
		l2, subscribed, routed, sessions := 0, 0, 0, 0
		for _, a := range anns {
			s := a.state()
			if s.sessions > 0 {
				subscribed++
			}
			if s.routes == 5 {
				routed++
			}
			sessions += s.sessions
			l2 += len(s.l2)
		}
		if time.Since(lastLog) > 15*time.Second {
			lastLog = time.Now()
			fmt.Fprintf(cfg.Log, "   ... %d subscribed (%d sessions), %d with their routes, %d of %d L2 addresses in plans; sessions ended: %v\n", subscribed, sessions, routed, l2, wantL2, endReasons(anns))
		}
		return subscribed == n && routed == n && l2 == wantL2
	}); err != nil {
		return res, err
	}
	if err := quiet(ctx, anns, 2*time.Second, 5*time.Minute); err != nil {
		return res, err
	}
	fmt.Fprintf(cfg.Log, "   %d announcers subscribed, %d L2 addresses owned, in %s\n", n, wantL2, time.Since(start).Round(time.Millisecond))

	sent0, at0 := env.keepAlivesSent(), time.Now()
	time.Sleep(keepAliveWindow)
	res.keepAlives = float64(env.keepAlivesSent()-sent0) / time.Since(at0).Seconds()
	fmt.Fprintf(cfg.Log, "   %.1f lease keep-alives a second from the replicas, settled\n", res.keepAlives)

	before := make([]simState, n)
	for i, a := range anns {
		before[i] = a.state()
	}
	leases, err := env.admin.LeaseIDs(ctx)
	if err != nil {
		return res, err
	}
	var affected []int
	for i, s := range before {
		if s.replica == 0 {
			affected = append(affected, i)
		}
	}
	res.affected = len(affected)
	killed := time.Now()
	env.replicas[0].crash()
	if err := waitFor(ctx, 10*time.Minute, "announcers of the dead replica current again", func() bool {
		for _, i := range affected {
			if anns[i].state().sessions <= before[i].sessions {
				return false
			}
		}
		return true
	}); err != nil {
		return res, err
	}
	for _, i := range affected {
		res.took = max(res.took, anns[i].state().firstAt.Sub(killed))
	}
	// Past the lease's TTL: the dead replica's lease has expired, and any
	// address or route they would move has moved.
	time.Sleep(3 * time.Second)
	if err := quiet(ctx, anns, 2*time.Second, 5*time.Minute); err != nil {
		return res, err
	}
	ownerOf := func(states []simState) map[string]string {
		m := map[string]string{}
		for i, s := range states {
			for addr := range s.l2 {
				m[addr] = anns[i].node
			}
		}
		return m
	}
	after := make([]simState, n)
	for i, a := range anns {
		after[i] = a.state()
		res.snapshots += after[i].snapshots - before[i].snapshots
		res.resumes += after[i].resumes - before[i].resumes
		if after[i].routes != before[i].routes {
			res.routeChanges++
		}
	}
	ob, oa := ownerOf(before), ownerOf(after)
	for addr, node := range ob {
		if oa[addr] != node {
			res.ownerChanges++
		}
	}
	now, err := env.admin.LeaseIDs(ctx)
	if err != nil {
		return res, err
	}
	for _, id := range now {
		if !slices.Contains(leases, id) {
			res.grants++
		}
	}
	fmt.Fprintf(cfg.Log, "   killed the replica of %d: all current again in %s; %d snapshots, %d resumed, %d lease grants, %d owner and %d route changes; sessions ended: %v\n",
		res.affected, res.took.Round(time.Millisecond), res.snapshots, res.resumes, res.grants, res.ownerChanges, res.routeChanges, endReasons(anns))
	return res, nil
}

type moveResult struct {
	n         int
	took, p50 time.Duration
	double    int // addresses in two announcers' plans at the end
}

// l2MoveRun: one node holds m L2 addresses (it was alone when they were
// allocated, and owners are sticky), 9 more are up; the node's session
// ends (its announcer's connection closes, as when it is killed); the
// time until every address is in another announcer's plan.
func l2MoveRun(ctx context.Context, cfg Config, m int) (res moveResult, err error) {
	res.n = m
	fmt.Fprintf(cfg.Log, "-- L2 move: %d addresses\n", m)
	env, err := newFleetEnv(ctx, cfg, 3, reconnectHeartbeat)
	if err != nil {
		return res, err
	}
	defer env.close()
	conns, err := env.dialAll(1)
	if err != nil {
		return res, err
	}
	const tenant = "move"
	if err := fleetSetup(ctx, conns[1][0], []string{tenant}, "2001:db8:10::/112"); err != nil {
		return res, err
	}
	var wg sync.WaitGroup
	vctx, killVictim := context.WithCancel(ctx)
	defer killVictim()
	victim := newSimAnnouncer(tenant, "victim", conns, 0)
	wg.Go(func() { victim.run(vctx) })
	actx, stopAnns := context.WithCancel(ctx)
	defer func() { stopAnns(); killVictim(); wg.Wait() }()
	if err := waitFor(ctx, time.Minute, "victim subscribed", func() bool { return victim.state().sessions > 0 }); err != nil {
		return res, err
	}
	start := time.Now()
	if err := allocate(ctx, conns[1][0], tenant, "scale-l2", m); err != nil {
		return res, err
	}
	if err := waitFor(ctx, 10*time.Minute, "victim owning every address", func() bool { return len(victim.state().l2) == m }); err != nil {
		return res, err
	}
	fmt.Fprintf(cfg.Log, "   %d addresses allocated and owned by the victim in %s\n", m, time.Since(start).Round(time.Millisecond))
	others := make([]*simAnnouncer, 9)
	for i := range others {
		others[i] = newSimAnnouncer(tenant, fmt.Sprintf("node-%d", i), conns, i%len(conns))
		wg.Go(func() { others[i].run(actx) })
	}
	if err := waitFor(ctx, time.Minute, "others subscribed", func() bool {
		for _, a := range others {
			if a.state().sessions == 0 {
				return false
			}
		}
		return true
	}); err != nil {
		return res, err
	}
	if err := quiet(ctx, append([]*simAnnouncer{victim}, others...), 2*time.Second, 5*time.Minute); err != nil {
		return res, err
	}
	if got := len(victim.state().l2); got != m {
		return res, fmt.Errorf("the victim holds %d addresses before it dies, want %d", got, m)
	}
	killed := time.Now()
	killVictim()
	var arrivals map[string]time.Time
	if err := waitFor(ctx, 5*time.Minute, "every address owned by another node", func() bool {
		arrivals = map[string]time.Time{}
		for _, a := range others {
			for addr, at := range a.state().l2 {
				if prev, ok := arrivals[addr]; ok && prev.Before(at) {
					at = prev
				}
				arrivals[addr] = at
			}
		}
		return len(arrivals) == m
	}); err != nil {
		return res, err
	}
	var ds []time.Duration
	for _, at := range arrivals {
		ds = append(ds, at.Sub(killed))
	}
	slices.Sort(ds)
	res.took, res.p50 = ds[len(ds)-1], bench.Percentile(ds, 50)
	// The guarantee: no address in two plans once settled.
	if err := quiet(ctx, others, time.Second, time.Minute); err != nil {
		return res, err
	}
	seen := map[string]bool{}
	for _, a := range others {
		for addr := range a.state().l2 {
			if seen[addr] {
				res.double++
			}
			seen[addr] = true
		}
	}
	fmt.Fprintf(cfg.Log, "   every address answered by another node %s after the victim died (p50 %s); %d in two plans\n", res.took.Round(time.Millisecond), res.p50.Round(time.Millisecond), res.double)
	return res, nil
}
