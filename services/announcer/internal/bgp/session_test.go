package bgp_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/internal/bgp/bgplab"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// TestTCPMD5 peers with two FRR routers that want TCP-MD5: with the right
// password the session comes up and carries the route; with a wrong one it
// never reaches Established, on either side, while the speaker keeps
// retrying.
func TestTCPMD5(t *testing.T) {
	requireRouters(t, netlab.FRRBgpd, "vtysh")
	t.Parallel()
	ctx := context.Background()
	lab := netlab.NewForTest(t)
	good := addHost(t, lab, "good", 1)
	bad := addHost(t, lab, "bad", 2)
	node := addHost(t, lab, "node", 11)
	routers := map[string]*netlab.FRR{}
	for name, h := range map[string]*netlab.Host{"good": good, "bad": bad} {
		f, err := h.StartFRR(ctx, netlab.FRRConfig{ASN: 64500, RouterID: h.Addr4(), Neighbors: []netlab.FRRNeighbor{
			{Address: node.Addr4(), ASN: 64501, Password: "s3cret-md5"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		routers[name] = f
	}
	sp := startSpeaker(t, node, bgplab.ChildOptions{})
	p := prefix("198.51.100.5/32")
	peers := []bgp.PeerConfig{
		{Name: "good", MyASN: 64501, PeerASN: 64500, Address: good.Addr4(), Password: "s3cret-md5", ConnectRetry: 2 * time.Second},
		{Name: "bad", MyASN: 64501, PeerASN: 64500, Address: bad.Addr4(), Password: "wrong", ConnectRetry: 2 * time.Second},
	}
	if err := sp.Apply(ctx, peers, []bgp.Route{{Prefix: p, Peer: "good"}, {Prefix: p, Peer: "bad"}}); err != nil {
		t.Fatal(err)
	}
	if err := sp.WaitEstablished(ctx, 30*time.Second, false, "good"); err != nil {
		t.Fatal(err)
	}
	if _, err := netlab.WaitPath(ctx, routers["good"], p, 10*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	// Several connection attempts (every 2 s) fit in the window.
	err := netlab.Consistently(ctx, 7*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
		st, err := sp.Session(ctx, "bad")
		if err != nil {
			return err
		}
		if st.State == bgp.StateEstablished || st.State == bgp.StateOpenConfirm {
			return fmt.Errorf("speaker's session with a wrong password is %s", st.State)
		}
		state, err := routers["bad"].NeighborState(ctx, node.Addr4())
		if err != nil {
			return err
		}
		if state == "Established" || state == "OpenConfirm" {
			return fmt.Errorf("FRR's session with a wrong password is %s", state)
		}
		return absent(ctx, routers["bad"], p)
	})
	if err != nil {
		t.Error(err)
	}
}

// TestGracefulRestart covers Options.KeepRoutesOnExit with FRR as the
// graceful-restart helper: a speaker that exits keeping routes leaves them
// (stale) at the router; its successor takes them over; a speaker that is
// killed and stays dead loses them after the restart time, not before; a
// plain exit withdraws at once.
func TestGracefulRestart(t *testing.T) {
	requireRouters(t, netlab.FRRBgpd, "vtysh")
	t.Parallel()
	ctx := context.Background()
	lab := netlab.NewForTest(t)
	rf := addHost(t, lab, "frr", 1)
	node := addHost(t, lab, "node", 11)
	frr, err := rf.StartFRR(ctx, netlab.FRRConfig{ASN: 64500, RouterID: rf.Addr4(), Neighbors: []netlab.FRRNeighbor{
		{Address: node.Addr4(), ASN: 64501},
	}})
	if err != nil {
		t.Fatal(err)
	}
	const restart = 5 * time.Second
	peers := []bgp.PeerConfig{{Name: "frr", MyASN: 64501, PeerASN: 64500, Address: rf.Addr4(),
		GracefulRestart: true, RestartTime: restart, ConnectRetry: 2 * time.Second}}
	p := prefix("198.51.100.7/32")
	routes := []bgp.Route{{Prefix: p, Peer: "frr", Communities: []uint32{community(65000, 7)}}}
	fresh := func(want bool) func(netlab.Path) error {
		return func(x netlab.Path) error {
			if x.Stale != !want {
				return fmt.Errorf("stale = %v", x.Stale)
			}
			return nil
		}
	}
	start := func(keep bool) *bgplab.Speaker {
		sp := startSpeaker(t, node, bgplab.ChildOptions{KeepRoutesOnExit: keep})
		if err := sp.Apply(ctx, peers, routes); err != nil {
			t.Fatal(err)
		}
		if err := sp.WaitEstablished(ctx, 30*time.Second, false, "frr"); err != nil {
			t.Fatal(err)
		}
		return sp
	}

	sp := start(true)
	if _, err := netlab.WaitPath(ctx, frr, p, 10*time.Second, fresh(true)); err != nil {
		t.Fatal(err)
	}
	if err := sp.Stop(ctx); err != nil {
		t.Fatalf("stop keeping routes: %v", err)
	}
	if _, err := netlab.WaitPath(ctx, frr, p, 4*time.Second, fresh(false)); err != nil {
		t.Fatalf("after an exit keeping routes: %v", err)
	}
	t.Log("exit keeping routes: FRR holds the route as stale")

	sp = start(true)
	if _, err := netlab.WaitPath(ctx, frr, p, 10*time.Second, fresh(true)); err != nil {
		t.Fatalf("successor: %v", err)
	}
	t.Log("successor: the route is fresh again")

	sp.Kill()
	killed := time.Now()
	// FRR sees the connection close at once; the margin is for a loaded
	// machine, where one vtysh call alone has taken over 2 s.
	if _, err := netlab.WaitPath(ctx, frr, p, 10*time.Second, fresh(false)); err != nil {
		t.Fatalf("after SIGKILL: %v", err)
	}
	if err := netlab.WaitNoPath(ctx, frr, p, restart+5*time.Second); err != nil {
		t.Fatal(err)
	}
	gone := time.Since(killed)
	t.Logf("killed and not restarted: FRR dropped the stale route %v after the kill (restart time %v)", gone.Round(time.Millisecond), restart)
	if gone < restart-time.Second {
		t.Errorf("stale route dropped after %v, before the restart time %v", gone, restart)
	}

	sp = start(false)
	if _, err := netlab.WaitPath(ctx, frr, p, 10*time.Second, fresh(true)); err != nil {
		t.Fatal(err)
	}
	stopAt := time.Now()
	if err := sp.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := netlab.WaitNoPath(ctx, frr, p, 2*time.Second); err != nil {
		t.Fatalf("plain exit with graceful restart negotiated: %v", err)
	}
	t.Logf("plain exit: withdrawn %v after the stop", time.Since(stopAt).Round(time.Millisecond))
}
