package l2_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/announcer/internal/l2/l2lab"
)

// TestDefendsAgainstAnotherHost: node1 answers for the service addresses;
// node2 then takes them as its own (configured on its eth0) and announces
// them, with a gratuitous ARP and an unsolicited neighbor advertisement,
// as a stale owner or a misconfigured host would. Node1 sees the claims and
// announces at once (RFC 5227's defence), so the client's entries, which
// the claims moved to node2, come back to node1 within milliseconds rather
// than at its next request.
func TestDefendsAgainstAnotherHost(t *testing.T) {
	lab := l2lab.New(t)
	ctx := t.Context()
	node1 := lab.MustMAC(lab.Node1, l2lab.LAN)
	h := startResponder(t, lab, lab.Node1, map[string][]netip.Addr{l2lab.LAN: {lab.VIP4, lab.VIP6}})
	for _, vip := range []netip.Addr{lab.VIP4, lab.VIP6} {
		lab.Ping(ctx, l2lab.LAN, vip)
		if _, err := lab.WaitNeigh(ctx, l2lab.LAN, vip, node1, 3*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	updates, stop, err := lab.WatchNeigh()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	// Node2 claims both: arping sends a gratuitous ARP, and a ping from
	// the IPv6 address makes node2's kernel solicit the client from it
	// (which moves the client's entry for it to node2).
	if _, err := lab.Exec(ctx, lab.Node2, "ip", "addr", "add", lab.VIP4.String()+"/32", "dev", l2lab.LAN); err != nil {
		t.Fatal(err)
	}
	if _, err := lab.Exec(ctx, lab.Node2, "ip", "-6", "addr", "add", lab.VIP6.String()+"/128", "dev", l2lab.LAN, "nodad"); err != nil {
		t.Fatal(err)
	}
	if _, err := lab.Exec(ctx, lab.Node2, "arping", "-U", "-c", "1", "-I", l2lab.LAN, "-s", lab.VIP4.String(), lab.VIP4.String()); err != nil {
		t.Fatal(err)
	}
	_, _ = lab.Exec(ctx, lab.Node2, "ping", "-6", "-c", "1", "-W", "1", "-I", lab.VIP6.String(), "2001:db8::10") // the echo's fate does not matter
	node2 := lab.MustMAC(lab.Node2, l2lab.LAN)
	// Every entry must have gone to node2 (the claim) and come back to
	// node1 (the defence).
	left := map[netip.Addr]string{lab.VIP4: "claim", lab.VIP6: "claim"}
	deadline := time.After(3 * time.Second)
	var claimedAt time.Time
	for len(left) > 0 {
		select {
		case u := <-updates:
			a, _ := netip.AddrFromSlice(u.IP)
			a = a.Unmap()
			step, ok := left[a]
			if !ok {
				continue
			}
			switch {
			case step == "claim" && u.HardwareAddr.String() == node2.String():
				left[a] = "defence"
				claimedAt = time.Now()
			case step == "defence" && u.HardwareAddr.String() == node1.String():
				t.Logf("%s back at node1 %v after node2's claim", a, time.Since(claimedAt))
				delete(left, a)
			}
		case <-deadline:
			t.Fatalf("within 3s the client's entries did not go to node2 and back to node1: %v (node1's stats %+v)", left, stats(t, h))
		}
	}
	s := stats(t, h)
	if s.IPv4.Defences < 1 || s.IPv6.Defences < 1 {
		t.Errorf("stats %+v: want a defence of each family counted", s)
	}
}
