package integration

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/netlab"
	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// Active-active L2 (MetalLB #2410, #439): an allocation of three addresses
// over three nodes is answered for by three distinct nodes. A prober asks
// for each address about a thousand times a second. Killing one node moves
// its address only, within the L2 failover bar; the two others keep being
// answered by their owners throughout, without a gap.
func TestL2ActiveActive(t *testing.T) {
	requireLab(t, "ping")
	c := newCluster(t, e2e.Options{Nodes: 3})
	ctx := context.Background()
	if err := c.CreatePool(ctx, "l2", e2e.L2PoolRanges...); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateL2Advertisement(ctx, "l2", "l2", "eth0"); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	resp, err := c.Allocations.Allocate(actx, &ipamv1.AllocateRequest{Parent: e2e.Parent, Allocation: &ipamv1.Allocation{
		Owner: "default/web", RequestedPool: "pools/l2", AddressCount: 3,
		IpFamilies: []ipamv1.IPFamily{ipamv1.IPFamily_IP_FAMILY_IPV4},
	}})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := e2e.Addrs(resp.GetAllocation())
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 3 {
		t.Fatalf("allocated %v, want three addresses", addrs)
	}
	owners := map[netip.Addr]*e2e.Node{}
	seen := map[string]bool{}
	for _, a := range addrs {
		n, err := c.WaitL2Owner(ctx, 20*time.Second, a)
		if err != nil {
			t.Fatal(err)
		}
		owners[a] = n
		seen[n.Name] = true
	}
	if len(seen) != 3 {
		t.Fatalf("owners %v: want three distinct nodes", seen)
	}
	// GetAllocation says which node announces which address.
	if err := netlab.Eventually(ctx, 10*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		got, err := c.Allocations.GetAllocation(ctx, &ipamv1.GetAllocationRequest{Name: resp.GetAllocation().GetName()})
		if err != nil {
			return err
		}
		byAddr := map[string]string{}
		for _, an := range got.GetAllocation().GetAnnouncements() {
			byAddr[an.GetAddress()] = an.GetAnnouncer()
		}
		want := map[string]string{}
		for _, a := range addrs {
			want[a.String()] = owners[a].ResourceName()
		}
		if diff := cmp.Diff(want, byAddr); diff != "" {
			return errorf("announcements (-want +got):\n%s", diff)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// One prober per address, asking every millisecond.
	probers := map[netip.Addr]*e2e.ARPProber{}
	for _, a := range addrs {
		p, err := c.StartARPProber(a, time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		probers[a] = p
		t.Cleanup(func() {
			if err := p.Stop(); err != nil {
				t.Errorf("prober of %s: %v", a, err)
			}
		})
	}
	for _, a := range addrs {
		p := probers[a]
		if err := netlab.Eventually(ctx, 10*time.Second, 20*time.Millisecond, func(context.Context) error {
			if n := len(p.Replies()); n < 200 {
				return errorf("%s: %d replies", a, n)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	ready := time.Now() // every prober has had its owner's replies
	victimAddr := addrs[0]
	victim := owners[victimAddr]
	t.Logf("owners: %s on %s, %s on %s, %s on %s; killing %s", addrs[0], owners[addrs[0]].Name, addrs[1], owners[addrs[1]].Name, addrs[2], owners[addrs[2]].Name, victim.Name)
	killed := time.Now()
	victim.Kill()

	// The victim's address moves: a node that is not the victim answers.
	var moved time.Time
	var newOwner net.HardwareAddr
	if err := netlab.Eventually(ctx, 10*time.Second, 5*time.Millisecond, func(context.Context) error {
		for _, r := range probers[victimAddr].Replies() {
			if r.At.After(killed) && !bytes.Equal(r.MAC, victim.MAC) {
				moved, newOwner = r.At, r.MAC
				return nil
			}
		}
		return errorf("%s: no other node answers yet", victimAddr)
	}); err != nil {
		t.Fatal(err)
	}
	outage := moved.Sub(killed)
	to := c.NodeByMAC(newOwner)
	if to == nil {
		t.Fatalf("%s: answered by %s, no node of the lab", victimAddr, newOwner)
	}
	t.Logf("%s moved from %s to %s after %v", victimAddr, victim.Name, to.Name, outage)
	if outage > failoverBar {
		t.Errorf("%s: outage %v > %v", victimAddr, outage, failoverBar)
	}

	// Watch the others until a second past the move.
	end := moved.Add(time.Second)
	for _, a := range addrs[1:] {
		p := probers[a]
		if err := netlab.Eventually(ctx, 10*time.Second, 20*time.Millisecond, func(context.Context) error {
			if r := p.Replies(); len(r) == 0 || !r[len(r)-1].At.After(end) {
				return errorf("%s: no reply after %v yet", a, end)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range addrs[1:] {
		p, owner := probers[a], owners[a]
		if diff := cmp.Diff([]string{owner.MAC.String()}, p.MACsBetween(ready, end)); diff != "" {
			t.Errorf("%s: MACs answering around the kill (-want +got):\n%s", a, diff)
		}
		t.Logf("%s: longest gap between replies from %s around the kill: %v (the machine's load included)", a, owner.Name, p.LongestGap(owner.MAC, ready, end))
		lost := lostReplies(ctx, p, owner.MAC, ready)
		t.Logf("%s: %d requests unanswered by %s since the probers started", a, lost, owner.Name)
		if lost > maxLost {
			t.Errorf("%s: %s left %d requests unanswered around the kill", a, owner.Name, lost)
		}
	}
	// The IPAM agrees: the two others did not move.
	for _, a := range addrs[1:] {
		n, err := c.WaitL2Owner(ctx, 5*time.Second, a)
		if err != nil {
			t.Fatal(err)
		}
		if n.Name != owners[a].Name {
			t.Errorf("%s: now announced by %s, was %s", a, n.Name, owners[a].Name)
		}
	}
	if t.Failed() {
		return
	}

	// The node returns: one of the two addresses sharing a node moves to
	// it, and the address alone on its node does not blink.
	owners[victimAddr] = to
	var alone netip.Addr
	for _, a := range addrs[1:] {
		if owners[a] != to {
			alone = a
		}
	}
	back := time.Now()
	if err := victim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	now := map[netip.Addr]string{}
	if err := netlab.Eventually(ctx, 20*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		seen := map[string]bool{}
		for _, a := range addrs {
			n, err := c.WaitL2Owner(ctx, 5*time.Second, a)
			if err != nil {
				return err
			}
			now[a] = n.Name
			seen[n.Name] = true
		}
		if len(seen) != 3 {
			return errorf("owners %v: not spread over three nodes yet", now)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s back: owners %v", victim.Name, now)
	shifted := 0
	for _, a := range addrs {
		if now[a] != owners[a].Name {
			shifted++
			if now[a] != victim.Name || a == alone {
				t.Errorf("%s moved from %s to %s", a, owners[a].Name, now[a])
			}
		}
	}
	if shifted != 1 {
		t.Errorf("%d addresses moved when %s returned, want 1", shifted, victim.Name)
	}
	settled := time.Now().Add(500 * time.Millisecond)
	p := probers[alone]
	if err := netlab.Eventually(ctx, 10*time.Second, 20*time.Millisecond, func(context.Context) error {
		if r := p.Replies(); len(r) == 0 || !r[len(r)-1].At.After(settled) {
			return errorf("%s: no reply after %v yet", alone, settled)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{owners[alone].MAC.String()}, p.MACsBetween(back, settled)); diff != "" {
		t.Errorf("%s: MACs answering while %s returned (-want +got):\n%s", alone, victim.Name, diff)
	}
	t.Logf("%s: longest gap between replies from %s while %s returned: %v (the machine's load included)", alone, owners[alone].Name, victim.Name, p.LongestGap(owners[alone].MAC, back, settled))
	lost := lostReplies(ctx, p, owners[alone].MAC, ready)
	t.Logf("%s: %d requests unanswered by %s since the probers started", alone, lost, owners[alone].Name)
	if lost > maxLost {
		t.Errorf("%s: %s left %d requests unanswered since the probers started", alone, owners[alone].Name, lost)
	}
}

// maxLost is how many of a prober's requests (about 1 ms apart) an owner
// that never stopped answering may leave unanswered: 0 on a quiet machine;
// with two labs at once on a loaded 2-core machine up to 7 were seen, when
// the node's right to answer lapsed for a few milliseconds (its heartbeat
// acknowledgement late; see docs/announcement.md). A failover of the
// address, which this guards against, leaves tens of them at least.
const maxLost = 20

// lostReplies returns how many of p's requests since from mac did not
// answer: the least count of unanswered requests over 300 ms of samples,
// so that replies in flight at one sample do not count.
func lostReplies(ctx context.Context, p *e2e.ARPProber, mac net.HardwareAddr, from time.Time) int {
	lost := p.Unanswered(mac, from)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end) && lost > 0; {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return lost
		}
		lost = min(lost, p.Unanswered(mac, from))
	}
	return lost
}
