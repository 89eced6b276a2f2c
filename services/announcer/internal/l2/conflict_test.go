package l2_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/pkg/testwait"
	"github.com/beaconlb/beacon/services/announcer/internal/l2"
	"github.com/beaconlb/beacon/services/announcer/internal/l2/l2lab"
)

// conflictSummary is what the tests compare of a Conflict.
type conflictSummary struct {
	Addr  string
	MAC   string
	Probe bool
}

func summarize(cs []l2.Conflict) []conflictSummary {
	out := make([]conflictSummary, 0, len(cs))
	for _, c := range cs {
		out = append(out, conflictSummary{Addr: c.Addr.String(), MAC: c.MAC.String(), Probe: c.Probe})
	}
	slices.SortFunc(out, func(a, b conflictSummary) int { return strings.Compare(a.Addr, b.Addr) })
	return out
}

// waitConflicts polls the helper's conflicts until they are want.
func waitConflicts(t *testing.T, h *l2lab.Responder, want []conflictSummary, within time.Duration) {
	t.Helper()
	var got []conflictSummary
	if err := testwait.Poll(t.Context(), within, func() error {
		cs, err := h.Conflicts()
		if err != nil {
			return err
		}
		if got = summarize(cs); !cmp.Equal(want, got) {
			return testwait.ErrNotYet
		}
		return nil
	}); err != nil {
		t.Fatalf("conflicts after %v (%v) (-want +got):\n%s", within, err, cmp.Diff(want, got))
	}
}

// TestProbeFindsPriorOwner: the client already uses both service addresses
// (configured on its eth0) when node1 is told to answer for them. Node1's
// ARP probe and DAD solicitation get the client kernel's answers: node1
// answers nothing for them, reports a conflict naming the client's MAC, and
// once the client lets the addresses go it answers for them (its next probe
// round finds them free).
func TestProbeFindsPriorOwner(t *testing.T) {
	lab := l2lab.New(t)
	ctx := t.Context()
	client := lab.MustMAC(lab.Client, l2lab.LAN).String()
	node1 := lab.MustMAC(lab.Node1, l2lab.LAN)
	mustExec(ctx, t, lab, lab.Client, "ip", "addr", "add", lab.VIP4.String()+"/32", "dev", l2lab.LAN)
	mustExec(ctx, t, lab, lab.Client, "ip", "-6", "addr", "add", lab.VIP6.String()+"/128", "dev", l2lab.LAN, "nodad")

	h, err := lab.StartProbingResponder(lab.Node1)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Set(map[string][]netip.Addr{l2lab.LAN: {lab.VIP4, lab.VIP6}}); err != nil {
		t.Fatal(err)
	}
	waitConflicts(t, h, []conflictSummary{
		{Addr: lab.VIP4.String(), MAC: client, Probe: true},
		{Addr: lab.VIP6.String(), MAC: client, Probe: true},
	}, 10*time.Second)
	s := stats(t, h)
	for fam, f := range map[string]l2.FamilyStats{"ipv4": s.IPv4, "ipv6": s.IPv6} {
		if f.Probes < 1 || f.Conflicts != 1 || f.Replies != 0 || f.Announcements != 0 {
			t.Errorf("%s stats %+v: want probes, one conflict, no reply and no announcement", fam, f)
		}
	}

	// The client gives the addresses up: node1 answers for them.
	mustExec(ctx, t, lab, lab.Client, "ip", "addr", "del", lab.VIP4.String()+"/32", "dev", l2lab.LAN)
	mustExec(ctx, t, lab, lab.Client, "ip", "-6", "addr", "del", lab.VIP6.String()+"/128", "dev", l2lab.LAN)
	waitConflicts(t, h, []conflictSummary{}, 15*time.Second)
	macs, err := lab.Arping(ctx, l2lab.LAN, lab.VIP4, 2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(repeat(node1.String(), 2), macStrings(macs)); diff != "" {
		t.Errorf("arping after the client let go (-want +got):\n%s", diff)
	}
	mac, err := lab.Ndisc6(ctx, l2lab.LAN, lab.VIP6, 3, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if mac.String() != node1.String() {
		t.Errorf("ndisc6 after the client let go: %s, want node1's %s", mac, node1)
	}
}

// TestKnownAddressesAreNotProbed: an address the IPAM says Beacon already
// answered for (a failover between Beacon's nodes) is answered at once, with
// no probe; one it does not know is probed first.
func TestKnownAddressesAreNotProbed(t *testing.T) {
	lab := l2lab.New(t)
	ctx := t.Context()
	node1 := lab.MustMAC(lab.Node1, l2lab.LAN).String()
	h, err := lab.StartProbingResponder(lab.Node1)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.SetKnown([]netip.Addr{lab.VIP4}); err != nil {
		t.Fatal(err)
	}
	if err := h.Set(map[string][]netip.Addr{l2lab.LAN: {lab.VIP4, lab.VIP6}}); err != nil {
		t.Fatal(err)
	}
	macs, err := lab.Arping(ctx, l2lab.LAN, lab.VIP4, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{node1}, macStrings(macs)); diff != "" {
		t.Errorf("arping (-want +got):\n%s", diff)
	}
	mac, err := lab.Ndisc6(ctx, l2lab.LAN, lab.VIP6, 3, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if mac.String() != node1 {
		t.Errorf("ndisc6: %s, want node1's %s", mac, node1)
	}
	s := stats(t, h)
	if s.IPv4.Probes != 0 || s.IPv6.Probes < 1 {
		t.Errorf("stats %+v: want no IPv4 probe (known) and IPv6 probes (not known)", s)
	}
}

// TestLaterConflictReported: node1 answers for the addresses (its probes
// found them free); then node2 starts using them (a gratuitous ARP, and a
// solicitation from the IPv6 address). Node1 records a conflict for each,
// naming node2's MAC, and keeps answering (and defending) them.
func TestLaterConflictReported(t *testing.T) {
	lab := l2lab.New(t)
	ctx := t.Context()
	node2 := lab.MustMAC(lab.Node2, l2lab.LAN).String()
	h, err := lab.StartProbingResponder(lab.Node1)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Set(map[string][]netip.Addr{l2lab.LAN: {lab.VIP4, lab.VIP6}}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, "node1 to announce both families", func() bool {
		s := stats(t, h)
		return s.IPv4.Announcements > 0 && s.IPv6.Announcements > 0
	})
	waitConflicts(t, h, []conflictSummary{}, time.Second)

	mustExec(ctx, t, lab, lab.Node2, "ip", "addr", "add", lab.VIP4.String()+"/32", "dev", l2lab.LAN)
	mustExec(ctx, t, lab, lab.Node2, "ip", "-6", "addr", "add", lab.VIP6.String()+"/128", "dev", l2lab.LAN, "nodad")
	mustExec(ctx, t, lab, lab.Node2, "arping", "-U", "-c", "1", "-I", l2lab.LAN, "-s", lab.VIP4.String(), lab.VIP4.String())
	_, _ = lab.Exec(ctx, lab.Node2, "ping", "-6", "-c", "1", "-W", "1", "-I", lab.VIP6.String(), "2001:db8::10") // the echo's fate does not matter
	waitConflicts(t, h, []conflictSummary{
		{Addr: lab.VIP4.String(), MAC: node2},
		{Addr: lab.VIP6.String(), MAC: node2},
	}, 10*time.Second)
	// The conflict is recorded just before the defence is sent and counted.
	testwait.Until(t, 10*time.Second, "a defence per family", func() bool {
		s := stats(t, h)
		return s.IPv4.Defences >= 1 && s.IPv6.Defences >= 1
	})
	s := stats(t, h)
	if s.IPv4.Conflicts != 1 || s.IPv6.Conflicts != 1 {
		t.Errorf("stats %+v: want one conflict per family", s)
	}
}

func mustExec(ctx context.Context, t *testing.T, lab *l2lab.Lab, ns string, args ...string) {
	t.Helper()
	if _, err := lab.Exec(ctx, ns, args...); err != nil {
		t.Fatal(err)
	}
}
