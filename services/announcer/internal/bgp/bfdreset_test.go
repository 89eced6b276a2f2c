package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// peerLog records a GoBGP server's peer state changes.
type peerLog struct {
	mu     sync.Mutex
	events []string // "established", "idle: <reason>"
}

func (l *peerLog) on(ev *apiutil.WatchEventMessage_PeerEvent, _ time.Time) {
	if ev.Type != apiutil.PEER_EVENT_STATE {
		return
	}
	s := ev.Peer.State
	e := fsmStateName(s.SessionState)
	if s.SessionState == bgp.BGP_FSM_IDLE && s.DisconnectMessage != "" {
		e += ": " + s.DisconnectMessage
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.events); n == 0 || l.events[n-1] != e {
		l.events = append(l.events, e)
	}
}

func (l *peerLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// TestGoBGPQueuesStaleReset is the minimal reproduction of GoBGP's half of
// issue 20, with plain GoBGP (no Speaker): a hard ResetPeer (what GoBGP's
// BFD calls when its session goes down) while the BGP session is not
// Established leaves its Cease queued in the peer's FSM, and the next
// session is torn down with it the moment it reaches Established. If this
// test starts failing, GoBGP has fixed it and bfdreset.go's workaround can
// go.
func TestGoBGPQueuesStaleReset(t *testing.T) {
	port := freePort(t, addr("127.0.0.2"))
	srv := server.NewBgpServer(server.LoggerOption(slog.New(slog.DiscardHandler), nil))
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve() }()
	t.Cleanup(func() { srv.Stop(); <-done })
	ctx := context.Background()
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: 64501, RouterId: "192.0.2.11", ListenPort: -1}}); err != nil {
		t.Fatal(err)
	}
	var log peerLog
	if err := srv.WatchEvent(ctx, server.WatchEventMessageCallbacks{OnPeerUpdate: log.on}, server.WatchPeer()); err != nil {
		t.Fatal(err)
	}
	pc := PeerConfig{Name: "c", MyASN: 64501, PeerASN: 64500, Address: addr("127.0.0.2"), Port: port,
		SourceAddress: addr("127.0.0.1"), HoldTime: 9 * time.Second, ConnectRetry: time.Second}
	if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(pc)}); err != nil {
		t.Fatal(err)
	}
	// Nobody listens yet: the session cannot be Established. Reset it as
	// GoBGP's BFD does.
	if err := srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: "127.0.0.2", Communication: "BFD is down"}); err != nil {
		t.Fatal(err)
	}
	startCollectorAt(t, "127.0.0.2", port, 64500, 64501)
	eventually(t, 20*time.Second, func() error {
		ev := log.snapshot()
		for i, e := range ev {
			if e == StateEstablished && i+1 < len(ev) {
				if want := "idle: notification-sent code 6(cease) subcode 4(administrative reset)"; ev[i+1] != want {
					return fmt.Errorf("after established %q, want %q (events %q)", ev[i+1], want, ev)
				}
				return nil
			}
		}
		return fmt.Errorf("no established session lost yet: %q", ev)
	})
}

// TestSpeakerDropsStaleReset is the same reset against a Speaker: it
// re-creates the peer, so the session that follows stays up.
func TestSpeakerDropsStaleReset(t *testing.T) {
	port := freePort(t, addr("127.0.0.2"))
	sp := New(slog.New(slog.DiscardHandler), Options{RouterID: addr("192.0.2.11"), PollInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- sp.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	pc := PeerConfig{Name: "c", MyASN: 64501, PeerASN: 64500, Address: addr("127.0.0.2"), Port: port,
		SourceAddress: addr("127.0.0.1"), HoldTime: 9 * time.Second, ConnectRetry: time.Second}
	if err := sp.Apply(ctx, []PeerConfig{pc}, nil); err != nil {
		t.Fatal(err)
	}
	var srv *server.BgpServer
	eventually(t, 10*time.Second, func() error {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		if srv = sp.srv; srv == nil || len(sp.applied.peers) == 0 {
			return errors.New("speaker not serving its peer yet")
		}
		return nil
	})
	var log peerLog
	if err := srv.WatchEvent(ctx, server.WatchEventMessageCallbacks{OnPeerUpdate: log.on}, server.WatchPeer()); err != nil {
		t.Fatal(err)
	}
	if err := srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: "127.0.0.2", Communication: "BFD is down"}); err != nil {
		t.Fatal(err)
	}
	startCollectorAt(t, "127.0.0.2", port, 64500, 64501)
	eventually(t, 20*time.Second, func() error {
		if !slices.Contains(log.snapshot(), StateEstablished) {
			return fmt.Errorf("not established yet: %q", log.snapshot())
		}
		return nil
	})
	// A queued Cease goes out within milliseconds of Established; two
	// seconds is plenty to see it.
	if err := netlab.Consistently(ctx, 2*time.Second, 20*time.Millisecond, func(context.Context) error {
		ev := log.snapshot()
		if i := slices.Index(ev, StateEstablished); i+1 < len(ev) {
			return fmt.Errorf("the first session was lost: %q", ev)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
