package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// sessionEndedMsg is what announcerd logs when its IPAM session ends.
const sessionEndedMsg = "IPAM session ended; reconnecting"

// RestartLab is a Cluster with several replicas set up to watch what a
// replica restart does to announcements: FRR peered with every node, one
// BGP-announced address, and an L2 address whose owner holds it by
// stickiness (it was moved once).
type RestartLab struct {
	C      *Cluster
	FRR    *netlab.FRR
	L2     *L2Service
	Prefix netip.Prefix // the BGP-announced address
}

// SetupRestartLab prepares c (built with Replicas > 1 and two or more
// nodes) as a RestartLab.
func (c *Cluster) SetupRestartLab(ctx context.Context) (*RestartLab, error) {
	frr, err := c.StartFRR(ctx, NodeASN, false, nil)
	if err != nil {
		return nil, err
	}
	svc, err := c.SetupL2(ctx)
	if err != nil {
		return nil, err
	}
	// Move the L2 addresses once, so that their owner holds them only by
	// stickiness (the recorded owner), not because the hash prefers it: a
	// replica that lost the recorded owner would move them back.
	if _, err := c.MeasureFailover(ctx, svc, Kill, 1); err != nil {
		return nil, err
	}
	if err := c.CreatePool(ctx, "bgp", BGPPoolRanges...); err != nil {
		return nil, err
	}
	if err := c.CreateBGPPeer(ctx, "frr", BGPPeer(FRRAddr4, NodeASN, nil)); err != nil {
		return nil, err
	}
	if err := c.CreateBGPAdvertisement(ctx, "adv", &ipamv1.BGPAdvertisement{Pools: []string{"pools/bgp"}}); err != nil {
		return nil, err
	}
	alloc, err := c.Allocate(ctx, "default/api", "bgp", false)
	if err != nil {
		return nil, err
	}
	addrs, err := Addrs(alloc)
	if err != nil {
		return nil, err
	}
	l := &RestartLab{C: c, FRR: frr, L2: svc, Prefix: HostPrefix(addrs[0])}
	if err := WaitNextHops(ctx, frr, l.Prefix, 30*time.Second, l.nextHops()...); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *RestartLab) nextHops() []netip.Addr {
	hops := make([]netip.Addr, len(l.C.Nodes))
	for i := range hops {
		hops[i] = NodeAddr4(i)
	}
	return hops
}

// RestartOutcome is what a series of rolling restarts did to the
// announcements. Every count is 0 when nothing was withdrawn or moved.
type RestartOutcome struct {
	// Restarts is how many replica restarts there were.
	Restarts int
	// Polls is how many times FRR's paths were read; PathGaps lists the
	// polls at which FRR lacked the path of a node (a withdrawal).
	Polls    int
	PathGaps []string
	// Updates is how many BGP UPDATE messages FRR received from the nodes,
	// and SessionDrops how many of their sessions dropped.
	Updates, SessionDrops int
	// Resubscribed is how many announcer sessions moved to another replica.
	Resubscribed int
	// WrongMACs lists the MACs other than the L2 owner's that answered ARP
	// for its address; OwnerMoved is set if the owner differs at the end.
	WrongMACs  []string
	OwnerMoved bool
	// LongestARPGap is the longest time without an ARP reply from the
	// owner (the prober asks every 5 ms); Withheld is how many replies and
	// announcements the owner did not send for want of a right to answer
	// (beacon_announcer_l2_withheld): 0 means a gap was the machine's
	// scheduling, not the IPAM.
	LongestARPGap time.Duration
	Withheld      int
	// Took is how long the restarts took in all.
	Took time.Duration
}

// RouteWithdrawals counts what FRR saw of a withdrawal: polls without a
// node's path, UPDATE messages (a withdrawal is one; Beacon sends none
// while its routes stay as they are) and dropped sessions.
func (o RestartOutcome) RouteWithdrawals() int {
	return len(o.PathGaps) + o.Updates + o.SessionDrops
}

// L2OwnerChanges counts the MACs other than the owner's that answered ARP
// for its address, and one more if the owner moved.
func (o RestartOutcome) L2OwnerChanges() int {
	n := len(o.WrongMACs)
	if o.OwnerMoved {
		n++
	}
	return n
}

// benchRestart runs cfg.RestartRounds rolling restarts of three replicas
// under two subscribed nodes, FRR and an L2 address, then as many rounds
// of crashes (SIGKILL).
func benchRestart(ctx context.Context, cfg BenchConfig, logf func(string, ...any)) (figs []Figure, err error) {
	if cfg.RestartRounds <= 0 {
		return nil, nil
	}
	if cfg.EtcdBin == "" {
		logf("SKIPPING the rolling-restart benchmark: no etcd binary (make testbins)")
		return nil, nil
	}
	c, err := New(ctx, Options{Bin: cfg.Bin, Nodes: 2, Replicas: 3, EtcdBin: cfg.EtcdBin, Logf: logf})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	lab, err := c.SetupRestartLab(ctx)
	if err != nil {
		return nil, err
	}
	out, err := lab.RollingRestart(ctx, cfg.RestartRounds)
	figs = restartFigures("restart", out)
	logf("rolling restarts: %d in %v, %d announcer sessions moved, %d FRR polls missing a path %v, %d UPDATEs, %d sessions dropped, other MACs answering ARP %v, owner moved %v, longest ARP gap %v, %d replies withheld",
		out.Restarts, out.Took.Round(time.Millisecond), out.Resubscribed, len(out.PathGaps), out.PathGaps, out.Updates, out.SessionDrops, out.WrongMACs, out.OwnerMoved, out.LongestARPGap.Round(time.Millisecond), out.Withheld)
	if err != nil {
		return figs, err
	}
	out, err = lab.RollingKill(ctx, cfg.RestartRounds)
	logf("rolling crashes (SIGKILL): %d in %v, %d announcer sessions moved, %d FRR polls missing a path %v, %d UPDATEs, %d sessions dropped, other MACs answering ARP %v, owner moved %v, longest ARP gap %v, %d replies withheld",
		out.Restarts, out.Took.Round(time.Millisecond), out.Resubscribed, len(out.PathGaps), out.PathGaps, out.Updates, out.SessionDrops, out.WrongMACs, out.OwnerMoved, out.LongestARPGap.Round(time.Millisecond), out.Withheld)
	if err != nil {
		return figs, err
	}
	return append(figs, restartFigures("restart_kill", out)...), nil
}

func restartFigures(prefix string, out RestartOutcome) []Figure {
	return []Figure{
		{Name: prefix + "_replica_restarts", Count: out.Restarts, Unit: "count"},
		{Name: prefix + "_route_withdrawals", Count: out.RouteWithdrawals(), Unit: "count"},
		{Name: prefix + "_l2_owner_changes", Count: out.L2OwnerChanges(), Unit: "count"},
		{Name: prefix + "_l2_withheld", Count: out.Withheld, Unit: "count"},
		{Name: prefix + "_l2_reply_gap_max", Value: out.LongestARPGap},
	}
}

// RollingRestart restarts every replica in turn, rounds times over: each
// is sent SIGTERM, started again and waited for until it serves and every
// announcer whose session it ended has subscribed again (to another
// replica). Meanwhile it watches FRR's paths for the BGP address, FRR's
// counters, and the ARP replies for the L2 address.
func (l *RestartLab) RollingRestart(ctx context.Context, rounds int) (RestartOutcome, error) {
	return l.restarts(ctx, rounds, false)
}

// RollingKill is RollingRestart with SIGKILL instead of SIGTERM: each
// replica crashes, ending its announcers' streams without a farewell, and
// leaving its lease (which their registrations are tied to) to expire.
// It watches for 3 s after the last restart, past that lease's 2 s TTL.
func (l *RestartLab) RollingKill(ctx context.Context, rounds int) (RestartOutcome, error) {
	return l.restarts(ctx, rounds, true)
}

func (l *RestartLab) restarts(ctx context.Context, rounds int, kill bool) (RestartOutcome, error) {
	c := l.C
	var out RestartOutcome
	before, err := l.neighbors(ctx)
	if err != nil {
		return out, err
	}
	withheld0, err := l.L2.Owner.withheld(ctx)
	if err != nil {
		return out, err
	}
	paths := WatchPaths(ctx, l.FRR, l.Prefix, 20*time.Millisecond, l.nextHops()...)
	prober, err := c.StartARPProber(l.L2.V4(), 5*time.Millisecond)
	if err != nil {
		paths.Stop()
		return out, err
	}
	start := time.Now()
	restartErr := func() error {
		for range rounds {
			for i := range c.ipamd {
				n, err := c.restartReplica(ctx, i, kill)
				out.Resubscribed += n
				if err != nil {
					return err
				}
				out.Restarts++
			}
		}
		// The owner and the routes stay as they were after the last
		// restart, too (after a crash, past the TTL of the lease the
		// dead replica kept alive).
		settle := time.Second
		if kill {
			settle = 3 * time.Second
		}
		return netlab.Consistently(ctx, settle, 50*time.Millisecond, func(ctx context.Context) error {
			_, err := c.WaitL2Owner(ctx, time.Second, l.L2.Addrs...)
			return err
		})
	}()
	end := time.Now()
	out.Took = end.Sub(start)
	out.Polls, out.PathGaps = paths.Stop()
	errs := []error{restartErr, prober.Stop()}
	owner := l.L2.Owner.MAC.String()
	for _, mac := range prober.MACsBetween(start, end) {
		if mac != owner {
			out.WrongMACs = append(out.WrongMACs, mac)
		}
	}
	out.LongestARPGap = prober.LongestGap(l.L2.Owner.MAC, start, end)
	if o, err := c.WaitL2Owner(ctx, 10*time.Second, l.L2.Addrs...); err != nil {
		errs = append(errs, err)
	} else {
		out.OwnerMoved = o != l.L2.Owner
	}
	withheld1, err := l.L2.Owner.withheld(ctx)
	errs = append(errs, err)
	out.Withheld = withheld1 - withheld0
	after, err := l.neighbors(ctx)
	errs = append(errs, err)
	if err == nil {
		for a, b := range before {
			out.Updates += after[a].UpdatesRecv - b.UpdatesRecv
			out.SessionDrops += after[a].Dropped - b.Dropped
		}
	}
	return out, errors.Join(errs...)
}

func (l *RestartLab) neighbors(ctx context.Context) (map[netip.Addr]FRRNeighbor, error) {
	out := map[netip.Addr]FRRNeighbor{}
	for _, a := range l.nextHops() {
		n, err := FRRNeighborInfo(ctx, l.FRR, a)
		if err != nil {
			return nil, err
		}
		out[a] = n
	}
	return out, nil
}

// restartReplica sends replica i SIGTERM (SIGKILL if kill), starts it
// again and waits until every announcer whose session it ended has a new
// one; it returns how many did.
func (c *Cluster) restartReplica(ctx context.Context, i int, kill bool) (int, error) {
	ended := make([]int, len(c.Nodes))
	for k, n := range c.Nodes {
		var err error
		if ended[k], err = n.countLog(sessionEndedMsg); err != nil {
			return 0, err
		}
	}
	t0 := time.Now()
	if kill {
		c.mu.Lock()
		p := c.ipamd[i]
		c.mu.Unlock()
		p.Kill()
	} else if _, err := c.StopReplica(ctx, i); err != nil {
		return 0, fmt.Errorf("e2e: replica %d on SIGTERM: %w", i, err)
	}
	if err := c.StartReplica(ctx, i); err != nil {
		return 0, err
	}
	moved := 0
	for k, n := range c.Nodes {
		now, err := n.countLog(sessionEndedMsg)
		if err != nil {
			return moved, err
		}
		if now == ended[k] {
			continue // its session was on another replica
		}
		moved++
		if err := n.WaitSubscribedSince(ctx, t0); err != nil {
			return moved, fmt.Errorf("e2e: %s after replica %d restarted: %w", n.Name, i, err)
		}
	}
	c.Logf("replica %d restarted and every announcer subscribed in %v (%d moved)", i, time.Since(t0).Round(time.Millisecond), moved)
	return moved, nil
}

// withheld reads the node's beacon_announcer_l2_withheld counters (all
// families) from its announcerd's metrics.
// Withheld is how many L2 replies the node's announcerd has withheld so
// far (beacon_announcer_l2_withheld, summed): replies it did not send
// because its right to answer had lapsed.
func (n *Node) Withheld(ctx context.Context) (int, error) { return n.withheld(ctx) }

func (n *Node) withheld(ctx context.Context) (int, error) {
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		return DialerIn(n.Host.NS)(ctx, addr)
	}}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:7402/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("e2e: %s metrics: %w", n.Name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	total := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(line, "beacon_announcer_l2_withheld") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("e2e: %s metrics: %q: %w", n.Name, line, err)
		}
		total += int(v)
	}
	return total, nil
}
