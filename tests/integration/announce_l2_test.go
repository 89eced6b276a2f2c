package integration

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/announcer/netlab"
	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// Two nodes run announcerd; a dual-stack allocation is answered by exactly
// one of them: arping gets its MAC, and so does ndisc6 and the client
// kernel's IPv6 neighbour entry after a ping. Releasing the allocation
// silences it.
func TestL2OneNodeAnswers(t *testing.T) {
	requireLab(t, "arping", "ndisc6", "ping")
	c := newCluster(t, e2e.Options{Nodes: 2})
	ctx := context.Background()
	svc, err := c.SetupL2(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v4, v6 := svc.Addrs[0], svc.Addrs[1]
	t.Logf("%s: %s and %s announced by %s (%s)", svc.Alloc.GetName(), v4, v6, svc.Owner.Name, svc.Owner.MAC)

	macs, err := c.Arping(ctx, v4, 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{svc.Owner.MAC.String(), svc.Owner.MAC.String()}, macStrings(macs)); diff != "" {
		t.Errorf("arping %s: replies (-want +got):\n%s", v4, diff)
	}
	mac, err := c.Ndisc6(ctx, v6)
	if err != nil {
		t.Fatal(err)
	}
	if mac.String() != svc.Owner.MAC.String() {
		t.Errorf("ndisc6 %s: %v, want %s", v6, mac, svc.Owner.MAC)
	}
	// SetupL2 pinged both addresses; the kernel's entries must name the owner.
	for _, a := range svc.Addrs {
		n, err := c.Neigh(a)
		if err != nil {
			t.Fatal(err)
		}
		if n.MAC.String() != svc.Owner.MAC.String() {
			t.Errorf("client neighbour entry for %s: %v %s, want %s", a, n.MAC, n.State, svc.Owner.MAC)
		}
	}
	// Exactly one node answers: the prober asks by broadcast 100 times.
	p, err := c.StartARPProber(v4, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := netlab.Eventually(ctx, 5*time.Second, 20*time.Millisecond, func(context.Context) error {
		if n := len(p.Replies()); n < 100 {
			return errorf("%d replies", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{svc.Owner.MAC.String()}, p.MACsBetween(start, time.Now())); diff != "" {
		t.Errorf("MACs answering ARP for %s (-want +got):\n%s", v4, diff)
	}

	// Released: nobody answers any more.
	if err := c.Release(ctx, svc.Alloc.GetName()); err != nil {
		t.Fatal(err)
	}
	if err := netlab.Eventually(ctx, 5*time.Second, 20*time.Millisecond, func(context.Context) error {
		if last := p.LastFrom(svc.Owner.MAC); time.Since(last) < 200*time.Millisecond {
			return errorf("%s still answered %v ago", svc.Owner.Name, time.Since(last))
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if err := p.Stop(); err != nil {
		t.Error(err)
	}
	if mac, err := c.Ndisc6(ctx, v6); err != nil || mac != nil {
		t.Errorf("ndisc6 %s after release: %v, %v; want no answer", v6, mac, err)
	}
}

func macStrings(macs []net.HardwareAddr) []string {
	out := make([]string, len(macs))
	for i, m := range macs {
		out[i] = m.String()
	}
	return out
}
