package integration

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/netlab"
	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// Restarting ipamd (SIGTERM, then a new one on the same data directory)
// withdraws nothing: FRR keeps both nodes' paths without receiving a single
// UPDATE or losing a session, and the L2 owner stays the owner, the only
// node answering ARP, without a gap while its lease lives.
func TestIPAMRestartKeepsAnnouncements(t *testing.T) {
	requireLab(t, netlab.FRRBgpd, "vtysh", "ping")
	c := newCluster(t, e2e.Options{Nodes: 2})
	ctx := context.Background()
	frr, err := c.StartFRR(ctx, e2e.NodeASN, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := c.SetupL2(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Move the addresses once, so that their owner holds them only by
	// stickiness (the recorded owner), not because the hash prefers it: a
	// restart that lost the recorded owners would move them back.
	if _, err := c.MeasureFailover(ctx, svc, e2e.Kill, 1); err != nil {
		t.Fatal(err)
	}
	must(t, c.CreatePool(ctx, "bgp", e2e.BGPPoolRanges...))
	must(t, c.CreateBGPPeer(ctx, "frr", e2e.BGPPeer(e2e.FRRAddr4, e2e.NodeASN, nil)))
	must(t, c.CreateBGPAdvertisement(ctx, "adv", &ipamv1.BGPAdvertisement{Pools: []string{"pools/bgp"}}))
	alloc, err := c.Allocate(ctx, "default/api", "bgp", false)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := e2e.Addrs(alloc)
	if err != nil {
		t.Fatal(err)
	}
	prefix := e2e.HostPrefix(addrs[0])
	nextHops := []netip.Addr{e2e.NodeAddr4(0), e2e.NodeAddr4(1)}
	if err := e2e.WaitNextHops(ctx, frr, prefix, 30*time.Second, nextHops...); err != nil {
		t.Fatal(err)
	}
	frrBefore := frrNeighbors(ctx, t, frr, nextHops)

	paths := e2e.WatchPaths(ctx, frr, prefix, 50*time.Millisecond, nextHops...)
	prober, err := c.StartARPProber(svc.V4(), 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	took, err := c.StopIPAMD(ctx)
	if err != nil {
		t.Fatalf("ipamd on SIGTERM: %v\n%s", err, c.IPAMDLog(40))
	}
	t.Logf("ipamd stopped %v after SIGTERM", took.Round(time.Millisecond))
	if err := c.StartIPAMD(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("ipamd serving again %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	for _, n := range c.Nodes {
		if err := n.WaitSubscribedSince(ctx, start); err != nil {
			t.Fatal(err)
		}
	}
	resubscribed := time.Now()
	t.Logf("both announcers subscribed again %v after SIGTERM", resubscribed.Sub(start).Round(time.Millisecond))
	// The owner and the routes stay as they were after the reconnect, too.
	owner, err := c.WaitL2Owner(ctx, 10*time.Second, svc.Addrs...)
	if err != nil {
		t.Fatal(err)
	}
	if owner != svc.Owner {
		t.Errorf("L2 owner moved from %s to %s across the IPAM restart", svc.Owner.Name, owner.Name)
	}
	if err := netlab.Consistently(ctx, time.Second, 50*time.Millisecond, func(ctx context.Context) error {
		_, err := c.WaitL2Owner(ctx, time.Second, svc.Addrs...)
		return err
	}); err != nil {
		t.Error(err)
	}
	end := time.Now()
	polls, missed := paths.Stop()
	if err := prober.Stop(); err != nil {
		t.Error(err)
	}
	if len(missed) > 0 {
		t.Errorf("FRR's paths for %s changed in %d of %d polls: %v", prefix, len(missed), polls, missed)
	}
	if diff := cmp.Diff(frrBefore, frrNeighbors(ctx, t, frr, nextHops)); diff != "" {
		t.Errorf("FRR's neighbors changed across the IPAM restart (-before +after):\n%s", diff)
	}
	if macs := prober.MACsBetween(start, end); !cmp.Equal(macs, []string{svc.Owner.MAC.String()}) {
		t.Errorf("MACs answering ARP for %s during the restart: %v, want only %s's %s", svc.V4(), macs, svc.Owner.Name, svc.Owner.MAC)
	}
	// The owner answers only while a replica vouches for it (see "L2
	// ownership" in docs/announcement.md): the stopping replica's farewell
	// right lasts as long as the replica's lease is known to live, 1.4-1.9 s.
	// A restart that takes longer leaves a gap until the announcer is
	// subscribed again (with several replicas it reconnects to another at
	// once); it must answer again right after that.
	gap := prober.LongestGap(svc.Owner.MAC, start, end)
	t.Logf("longest gap in %s's ARP replies over %v: %v", svc.Owner.Name, end.Sub(start).Round(time.Millisecond), gap.Round(time.Millisecond))
	if gap > 200*time.Millisecond && resubscribed.Sub(start) < 1300*time.Millisecond {
		t.Errorf("the L2 owner stopped answering for %v during an IPAM restart shorter than its lease", gap.Round(time.Millisecond))
	}
	if back := prober.LongestGap(svc.Owner.MAC, resubscribed, end); back > 300*time.Millisecond {
		t.Errorf("the L2 owner's answers had a gap of %v after it had subscribed again", back.Round(time.Millisecond))
	}
}

func frrNeighbors(ctx context.Context, t *testing.T, frr *netlab.FRR, addrs []netip.Addr) map[netip.Addr]e2e.FRRNeighbor {
	t.Helper()
	out := map[netip.Addr]e2e.FRRNeighbor{}
	for _, a := range addrs {
		n, err := e2e.FRRNeighborInfo(ctx, frr, a)
		if err != nil {
			t.Fatal(err)
		}
		out[a] = n
	}
	return out
}
