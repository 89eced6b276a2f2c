package l2_test

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"

	"github.com/beaconlb/beacon/services/announcer/internal/l2"
	"github.com/beaconlb/beacon/services/announcer/internal/l2/l2lab"
)

// These tests run real responders (helper processes in node namespaces)
// against real clients (arping, ndisc6, ping and the client kernel's
// neighbour table) in namespaces made for each test; see package l2lab.

func startResponder(t *testing.T, lab *l2lab.Lab, ns string, desired map[string][]netip.Addr) *l2lab.Responder {
	t.Helper()
	h, err := lab.StartResponder(ns)
	if err != nil {
		t.Fatal(err)
	}
	if desired != nil {
		if err := h.Set(desired); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func stats(t *testing.T, h *l2lab.Responder) l2.Stats {
	t.Helper()
	s, err := h.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func macStrings(macs []net.HardwareAddr) []string {
	out := make([]string, 0, len(macs))
	for _, m := range macs {
		out = append(out, m.String())
	}
	return out
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestAnswers: a client resolving the service addresses with arping,
// ndisc6 and its own kernel (after a ping) gets node1's MAC; node2's
// responder, running with nothing to answer for, stays silent.
func TestAnswers(t *testing.T) {
	lab := l2lab.New(t)
	ctx := t.Context()
	node1 := lab.MustMAC(lab.Node1, l2lab.LAN).String()
	h := startResponder(t, lab, lab.Node1, map[string][]netip.Addr{l2lab.LAN: {lab.VIP4, lab.VIP6}})
	startResponder(t, lab, lab.Node2, nil)

	t.Run("arping", func(t *testing.T) {
		macs, err := lab.Arping(ctx, l2lab.LAN, lab.VIP4, 3, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(repeat(node1, 3), macStrings(macs)); diff != "" {
			t.Errorf("arping replies (-want +got):\n%s", diff)
		}
	})
	t.Run("ndisc6", func(t *testing.T) {
		mac, err := lab.Ndisc6(ctx, l2lab.LAN, lab.VIP6, 3, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(node1, mac.String()); diff != "" {
			t.Errorf("ndisc6 (-want +got):\n%s", diff)
		}
	})
	for _, vip := range []netip.Addr{lab.VIP4, lab.VIP6} {
		t.Run("kernel neighbour after ping "+vip.String(), func(t *testing.T) {
			lab.Ping(ctx, l2lab.LAN, vip)
			n, err := lab.WaitNeigh(ctx, l2lab.LAN, vip, lab.MustMAC(lab.Node1, l2lab.LAN), 3*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if n.State != "REACHABLE" && n.State != "STALE" && n.State != "DELAY" {
				t.Errorf("entry for %s is %s, want a resolved state", vip, n.State)
			}
			t.Logf("client: %s lladdr %s %s", vip, n.MAC, n.State)
		})
	}
	t.Run("MLD membership", func(t *testing.T) {
		out, err := lab.Exec(ctx, lab.Node1, "ip", "-6", "maddr", "show", "dev", l2lab.LAN)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "ff02::1:ff00:100") {
			t.Errorf("node1 has not joined the solicited-node group of %s (no MLD reports):\n%s", lab.VIP6, out)
		}
	})
	t.Run("stats", func(t *testing.T) {
		s := stats(t, h)
		t.Logf("node1 stats: %+v", s)
		if s.IPv4.Requests < 3 || s.IPv4.Replies < 3 || s.IPv6.Requests < 1 || s.IPv6.Replies < 1 {
			t.Errorf("stats %+v: want at least 3 IPv4 and 1 IPv6 requests answered", s)
		}
		if s.IPv4.Announcements < 2 || s.IPv6.Announcements < 1 || s.IPv4.Errors+s.IPv6.Errors != 0 {
			t.Errorf("stats %+v: want the first announcements sent and no errors", s)
		}
	})
}

// TestNUDDoesNotFail is the IPv6 NUD pitfall (and its IPv4 twin): with
// short reachable times, the client's kernel re-confirms its entries with
// unicast probes to the service addresses every few seconds while a ping
// keeps them in use. For about 10 s, every notification for them must show
// node1's MAC and never FAILED or INCOMPLETE, and probes must have happened.
func TestNUDDoesNotFail(t *testing.T) {
	t.Parallel()
	lab := l2lab.New(t)
	ctx := t.Context()
	node1 := lab.MustMAC(lab.Node1, l2lab.LAN)
	if err := lab.Sysctl(ctx, lab.Client,
		"net.ipv4.neigh.eth0.base_reachable_time_ms=1000", "net.ipv4.neigh.eth0.delay_first_probe_time=1",
		"net.ipv6.neigh.eth0.base_reachable_time_ms=1000", "net.ipv6.neigh.eth0.delay_first_probe_time=1"); err != nil {
		t.Fatal(err)
	}
	startResponder(t, lab, lab.Node1, map[string][]netip.Addr{l2lab.LAN: {lab.VIP4, lab.VIP6}})

	updates, stop, err := lab.WatchNeigh()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	soak, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, vip := range []netip.Addr{lab.VIP4, lab.VIP6} {
		if err := lab.StartPing(soak, l2lab.LAN, vip, 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}

	type seen struct{ Probes, Confirmed int }
	got := map[netip.Addr]*seen{lab.VIP4: {}, lab.VIP6: {}}
	var history []string
	for done := false; !done; {
		select {
		case u := <-updates:
			a, _ := netip.AddrFromSlice(u.IP)
			s, ok := got[a.Unmap()]
			if !ok {
				continue
			}
			state := l2lab.StateName(u.State)
			history = append(history, a.Unmap().String()+" "+u.HardwareAddr.String()+" "+state)
			switch {
			case u.State&(netlink.NUD_FAILED|netlink.NUD_INCOMPLETE) != 0:
				t.Errorf("%s went %s (the NUD pitfall)", a, state)
			case u.HardwareAddr != nil && !bytes.Equal(u.HardwareAddr, node1):
				t.Errorf("%s moved to %s", a, u.HardwareAddr)
			case u.State == netlink.NUD_PROBE:
				s.Probes++
			case u.State == netlink.NUD_REACHABLE && s.Probes > 0:
				s.Confirmed++
			}
		case <-soak.Done():
			done = true
		}
	}
	t.Logf("client neighbour notifications: %s", strings.Join(history, ", "))
	for vip, s := range got {
		t.Logf("%s: %d unicast probes, %d confirmations after a probe", vip, s.Probes, s.Confirmed)
		if s.Probes == 0 || s.Confirmed == 0 {
			t.Errorf("%s: no answered reachability probe in 10 s (probes %d, confirmed %d)", vip, s.Probes, s.Confirmed)
		}
		n, err := lab.Neigh(l2lab.LAN, vip)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(n.MAC, node1) || n.State == "FAILED" || n.State == "INCOMPLETE" {
			t.Errorf("%s at the end: %s %s, want node1's %s", vip, n.MAC, n.State, node1)
		}
	}
}

// TestFailover: node1's responder is SIGKILLed and node2's is told to
// answer; the client's existing entries must follow within the design's
// one-second bar, thanks to the announcements.
func TestFailover(t *testing.T) {
	lab := l2lab.New(t)
	const trials = 10
	results, err := lab.MeasureFailover(t.Context(), trials, lab.VIP4, lab.VIP6)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		t.Logf("failover %s (samples %v)", r, r.Samples)
		if len(r.Samples) != trials {
			t.Errorf("%s: %d samples, want %d", r.Addr, len(r.Samples), trials)
		}
		if p99 := r.Percentile(99); p99 >= time.Second {
			t.Errorf("%s: p99 failover %v, want under 1s", r.Addr, p99)
		}
	}
}

// TestRemoveStopsAnswering: an address removed with Set, or every address
// once Run's context is done, gets no reply from the moment the call
// returns.
func TestRemoveStopsAnswering(t *testing.T) {
	t.Parallel()
	lab := l2lab.New(t)
	ctx := t.Context()
	node1 := lab.MustMAC(lab.Node1, l2lab.LAN).String()
	h := startResponder(t, lab, lab.Node1, map[string][]netip.Addr{l2lab.LAN: {lab.VIP4, lab.VIP6}})

	check := func(t *testing.T, want bool) {
		t.Helper()
		macs, err := lab.Arping(ctx, l2lab.LAN, lab.VIP4, 3, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		mac, err := lab.Ndisc6(ctx, l2lab.LAN, lab.VIP6, 2, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		type answers struct {
			Arping []string
			Ndisc6 string
		}
		wantA := answers{Arping: []string{}}
		if want {
			wantA = answers{Arping: repeat(node1, 3), Ndisc6: node1}
		}
		gotA := answers{Arping: macStrings(macs)}
		if mac != nil {
			gotA.Ndisc6 = mac.String()
		}
		if diff := cmp.Diff(wantA, gotA); diff != "" {
			t.Errorf("answers (-want +got):\n%s", diff)
		}
	}
	check(t, true)

	// Another address keeps eth0's sockets open: what stops the answers is
	// Set itself, not sockets closing.
	before := stats(t, h)
	if err := h.Set(map[string][]netip.Addr{l2lab.LAN: {netip.MustParseAddr("192.0.2.101")}}); err != nil {
		t.Fatal(err)
	}
	t.Run("removed", func(t *testing.T) { check(t, false) })
	after := stats(t, h)
	if after.IPv4.Requests <= before.IPv4.Requests || after.IPv6.Requests <= before.IPv6.Requests ||
		after.IPv4.Replies != before.IPv4.Replies || after.IPv6.Replies != before.IPv6.Replies {
		t.Errorf("stats before %+v, after %+v: want requests seen and none answered", before, after)
	}

	if err := h.Set(map[string][]netip.Addr{l2lab.LAN: {lab.VIP4, lab.VIP6}}); err != nil {
		t.Fatal(err)
	}
	t.Run("added back", func(t *testing.T) { check(t, true) })

	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Run("after Run's context is done", func(t *testing.T) { check(t, false) })
}

// TestTwoInterfaces: each address is answered on its own interface only,
// with that interface's MAC. Node1's eth1 has no address of its own.
func TestTwoInterfaces(t *testing.T) {
	t.Parallel()
	lab := l2lab.New(t)
	ctx := t.Context()
	eth0 := lab.MustMAC(lab.Node1, l2lab.LAN).String()
	eth1 := lab.MustMAC(lab.Node1, l2lab.LAN2).String()
	startResponder(t, lab, lab.Node1, map[string][]netip.Addr{
		l2lab.LAN:  {lab.VIP4, lab.VIP6},
		l2lab.LAN2: {lab.VIP4B, lab.VIP6B},
	})
	tests := []struct {
		dev  string
		vip  netip.Addr
		want string // "" for no answer
	}{
		{l2lab.LAN, lab.VIP4, eth0},
		{l2lab.LAN, lab.VIP6, eth0},
		{l2lab.LAN2, lab.VIP4B, eth1},
		{l2lab.LAN2, lab.VIP6B, eth1},
		{l2lab.LAN2, lab.VIP4, ""}, // answered on eth0 only
		{l2lab.LAN, lab.VIP4B, ""}, // answered on eth1 only
	}
	for _, tt := range tests {
		t.Run(tt.dev+" "+tt.vip.String(), func(t *testing.T) {
			t.Parallel()
			var got string
			if tt.vip.Is4() {
				macs, err := lab.Arping(ctx, tt.dev, tt.vip, 2, 1500*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				if len(macs) > 0 {
					got = strings.Join(macStrings(macs), ",")
				}
				if tt.want != "" {
					tt.want = tt.want + "," + tt.want
				}
			} else {
				mac, err := lab.Ndisc6(ctx, tt.dev, tt.vip, 3, 500*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				if mac != nil {
					got = mac.String()
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
}

// waitAnswer repeats arping (one request at a time) until node1's MAC
// answers and returns how long that took.
func waitAnswer(ctx context.Context, t *testing.T, lab *l2lab.Lab, dev string, vip netip.Addr, mac net.HardwareAddr, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		macs, err := lab.Arping(ctx, dev, vip, 1, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if len(macs) > 0 && bytes.Equal(macs[0], mac) {
			return time.Since(start)
		}
	}
	t.Fatalf("%s on %s not answered by %s within %v", vip, dev, mac, within)
	return 0
}

// TestInterfaceDownUp: the responder keeps serving across its interface
// going down and up, and across the interface being deleted and created
// again (new index, new MAC); Set works while the interface is down.
func TestInterfaceDownUp(t *testing.T) {
	t.Parallel()
	lab := l2lab.New(t)
	ctx := t.Context()
	eth0 := lab.MustMAC(lab.Node1, l2lab.LAN)
	h := startResponder(t, lab, lab.Node1, map[string][]netip.Addr{
		l2lab.LAN:  {lab.VIP4},
		l2lab.LAN2: {lab.VIP4B},
	})
	waitAnswer(ctx, t, lab, l2lab.LAN, lab.VIP4, eth0, 3*time.Second)

	t.Run("down and up", func(t *testing.T) {
		if _, err := lab.Exec(ctx, lab.Node1, "ip", "link", "set", l2lab.LAN, "down"); err != nil {
			t.Fatal(err)
		}
		// Set while down: the new address is served once the link is up.
		if err := h.Set(map[string][]netip.Addr{l2lab.LAN: {lab.VIP4, lab.VIP6}, l2lab.LAN2: {lab.VIP4B}}); err != nil {
			t.Fatal(err)
		}
		if macs, err := lab.Arping(ctx, l2lab.LAN, lab.VIP4, 1, time.Second); err != nil || len(macs) != 0 {
			t.Fatalf("answered while the interface was down: %v %v", macs, err)
		}
		if _, err := lab.Exec(ctx, lab.Node1, "ip", "link", "set", l2lab.LAN, "up"); err != nil {
			t.Fatal(err)
		}
		took := waitAnswer(ctx, t, lab, l2lab.LAN, lab.VIP4, eth0, 5*time.Second)
		t.Logf("answering again %v after link up", took.Round(time.Millisecond))
		mac, err := lab.Ndisc6(ctx, l2lab.LAN, lab.VIP6, 3, time.Second)
		if err != nil || !bytes.Equal(mac, eth0) {
			t.Errorf("ndisc6 after link up: %v %v, want %s", mac, err, eth0)
		}
	})
	t.Run("deleted and created again", func(t *testing.T) {
		old := lab.MustMAC(lab.Node1, l2lab.LAN2)
		waitAnswer(ctx, t, lab, l2lab.LAN2, lab.VIP4B, old, 3*time.Second)
		start := time.Now()
		if err := lab.ReplaceNode1LAN2(ctx); err != nil {
			t.Fatal(err)
		}
		mac := lab.MustMAC(lab.Node1, l2lab.LAN2)
		if bytes.Equal(mac, old) {
			t.Fatalf("re-created interface kept MAC %s", mac)
		}
		waitAnswer(ctx, t, lab, l2lab.LAN2, lab.VIP4B, mac, 5*time.Second)
		t.Logf("answering with the new MAC %s %v after re-creation began", mac, time.Since(start).Round(time.Millisecond))
	})
	s := stats(t, h)
	t.Logf("node1 stats: %+v", s)
}
