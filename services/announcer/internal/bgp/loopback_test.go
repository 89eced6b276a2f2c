package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/beaconlb/beacon/pkg/testwait"
)

// collector is a plain GoBGP server on a loopback address that accepts
// everything, standing in for a router in tests that need no root.
type collector struct {
	srv  *server.BgpServer
	addr netip.Addr
	port uint16
}

// seen is what a collector holds for one prefix.
type seen struct {
	Communities []string
	Large       []string
	LocalPref   uint32
	MED         uint32
	ASPath      string // the AS numbers, space-separated
}

func freePort(t *testing.T, a netip.Addr) uint16 {
	t.Helper()
	l, err := net.Listen("tcp", netip.AddrPortFrom(a, 0).String())
	if err != nil {
		t.Skipf("SKIPPED: cannot listen on %s: %v", a, err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

func startCollector(t *testing.T, a string, asn, speakerASN uint32) *collector {
	t.Helper()
	return startCollectorAt(t, a, freePort(t, addr(a)), asn, speakerASN)
}

// startCollectorAt is startCollector on a given port.
func startCollectorAt(t *testing.T, a string, port uint16, asn, speakerASN uint32) *collector {
	t.Helper()
	c := &collector{addr: addr(a), port: port}
	c.srv = server.NewBgpServer(server.LoggerOption(slog.New(slog.DiscardHandler), nil))
	done := make(chan struct{})
	go func() { defer close(done); c.srv.Serve() }()
	t.Cleanup(func() { c.srv.Stop(); <-done })
	ctx := context.Background()
	if err := c.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: asn, RouterId: a, ListenPort: int32(c.port), ListenAddresses: []string{a},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := c.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: speakerASN},
		Transport: &api.Transport{PassiveMode: true},
	}}); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *collector) rib(t *testing.T) map[netip.Prefix]seen {
	t.Helper()
	out := map[netip.Prefix]seen{}
	err := c.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgp.RF_IPv4_UC},
		func(n bgp.NLRI, paths []*apiutil.Path) {
			for _, p := range paths {
				var s seen
				for _, a := range p.Attrs {
					switch a := a.(type) {
					case *bgp.PathAttributeCommunities:
						for _, v := range a.Value {
							s.Communities = append(s.Communities, communityString(v))
						}
					case *bgp.PathAttributeLargeCommunities:
						for _, v := range a.Values {
							s.Large = append(s.Large, fmt.Sprintf("%d:%d:%d", v.ASN, v.LocalData1, v.LocalData2))
						}
					case *bgp.PathAttributeLocalPref:
						s.LocalPref = a.Value
					case *bgp.PathAttributeMultiExitDisc:
						s.MED = a.Value
					case *bgp.PathAttributeAsPath:
						var asns []string
						for _, seg := range a.Value {
							for _, n := range seg.GetAS() {
								asns = append(asns, fmt.Sprint(n))
							}
						}
						s.ASPath = strings.Join(asns, " ")
					}
				}
				slices.Sort(s.Communities)
				slices.Sort(s.Large)
				out[prefix(n.String())] = s
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := testwait.Poll(t.Context(), timeout, cond); err != nil {
		t.Fatal(err)
	}
}

// TestLoopbackPerPeerAttributes runs the Speaker in-process against two
// GoBGP collectors on loopback addresses (no root needed): the same prefix
// reaches two peers with different attributes, a route reaches only its
// peer, changes re-send or withdraw per peer, and removal withdraws.
func TestLoopbackPerPeerAttributes(t *testing.T) {
	ebgp := startCollector(t, "127.0.0.2", 64500, 64501)
	ibgp := startCollector(t, "127.0.0.3", 64501, 64501)
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

	peers := []PeerConfig{
		{Name: "e", MyASN: 64501, PeerASN: 64500, Address: ebgp.addr, Port: ebgp.port, SourceAddress: addr("127.0.0.1")},
		{Name: "i", MyASN: 64501, PeerASN: 64501, Address: ibgp.addr, Port: ibgp.port, SourceAddress: addr("127.0.0.1")},
	}
	p1, p2 := prefix("203.0.113.1/32"), prefix("203.0.113.2/32")
	c := func(a, b uint32) uint32 { return a<<16 | b }
	steps := []struct {
		name           string
		routes         []Route
		wantE, wantI   map[netip.Prefix]seen
		wantAdvertised map[string]int
	}{
		{
			name: "one prefix, two attribute sets; one prefix for one peer",
			routes: []Route{
				{Prefix: p1, Peer: "e", Communities: []uint32{c(65000, 1)}, LargeCommunities: [][3]uint32{{64501, 1, 1}}},
				{Prefix: p1, Peer: "i", Communities: []uint32{c(65000, 2)}, LocalPref: 200},
				{Prefix: p2, Peer: "e"},
			},
			wantE: map[netip.Prefix]seen{
				p1: {Communities: []string{"65000:1"}, Large: []string{"64501:1:1"}, ASPath: "64501"},
				p2: {ASPath: "64501"},
			},
			wantI:          map[netip.Prefix]seen{p1: {Communities: []string{"65000:2"}, LocalPref: 200}},
			wantAdvertised: map[string]int{"e": 2, "i": 1},
		},
		{
			name: "attributes change for one peer, prefix moves between peers",
			routes: []Route{
				{Prefix: p1, Peer: "e", Communities: []uint32{c(65000, 3)}},
				{Prefix: p2, Peer: "i"},
			},
			wantE:          map[netip.Prefix]seen{p1: {Communities: []string{"65000:3"}, ASPath: "64501"}},
			wantI:          map[netip.Prefix]seen{p2: {LocalPref: 100}},
			wantAdvertised: map[string]int{"e": 1, "i": 1},
		},
		{
			// A global group's backup member: less preferred by MED, AS
			// path length (eBGP) and local preference (iBGP).
			name: "MED and AS path prepend",
			routes: []Route{
				{Prefix: p1, Peer: "e", MED: 1000, ASPathPrepend: 3},
				{Prefix: p1, Peer: "i", MED: 1000, ASPathPrepend: 3, LocalPref: 50},
			},
			wantE:          map[netip.Prefix]seen{p1: {MED: 1000, ASPath: "64501 64501 64501 64501"}},
			wantI:          map[netip.Prefix]seen{p1: {MED: 1000, LocalPref: 50}}, // never prepended on iBGP
			wantAdvertised: map[string]int{"e": 1, "i": 1},
		},
		{
			name:           "everything withdrawn",
			wantE:          map[netip.Prefix]seen{},
			wantI:          map[netip.Prefix]seen{},
			wantAdvertised: map[string]int{"e": 0, "i": 0},
		},
	}
	for _, st := range steps {
		// Twice: Apply is idempotent.
		for range 2 {
			if err := sp.Apply(ctx, peers, st.routes); err != nil {
				t.Fatalf("%s: apply: %v", st.name, err)
			}
		}
		eventually(t, 20*time.Second, func() error {
			if diff := cmp.Diff(st.wantE, ebgp.rib(t)); diff != "" {
				return fmt.Errorf("%s: eBGP collector (-want +got):\n%s", st.name, diff)
			}
			if diff := cmp.Diff(st.wantI, ibgp.rib(t)); diff != "" {
				return fmt.Errorf("%s: iBGP collector (-want +got):\n%s", st.name, diff)
			}
			got := map[string]int{}
			for _, s := range sp.Sessions() {
				if s.State != StateEstablished {
					return fmt.Errorf("%s: session %s is %s", st.name, s.Peer, s.State)
				}
				got[s.Peer] = s.Advertised
			}
			if diff := cmp.Diff(st.wantAdvertised, got); diff != "" {
				return fmt.Errorf("%s: advertised counts (-want +got):\n%s", st.name, diff)
			}
			return nil
		})
	}
	if n, err := sp.Learned(ctx); err != nil || n != 0 {
		t.Errorf("Learned = %d, %v; want 0", n, err)
	}
	cancel()
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
	runErr <- nil // for the cleanup
	for _, s := range sp.Sessions() {
		if s.State != StateIdle {
			t.Errorf("after Run: %s is %s", s.Peer, s.State)
		}
	}
}

// TestLoopbackLifecycle covers the Speaker's life around Run: a desired
// state applied before Run takes effect when Run starts, Events signals
// session changes, a refused route does not stop the rest, a changed peer
// setting re-creates the session, and Run refuses a second call and a
// missing router ID.
func TestLoopbackLifecycle(t *testing.T) {
	col := startCollector(t, "127.0.0.4", 64500, 64501)
	if err := New(nil, Options{}).Run(context.Background()); err == nil {
		t.Error("Run without a router ID succeeded")
	}
	sp := New(slog.New(slog.DiscardHandler), Options{RouterID: addr("192.0.2.11"), PollInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	peers := []PeerConfig{{Name: "c", MyASN: 64501, PeerASN: 64500, Address: col.addr, Port: col.port, SourceAddress: addr("127.0.0.1")}}
	p1, p2 := prefix("198.51.100.1/32"), prefix("198.51.100.2/32")
	err := sp.Apply(ctx, peers, []Route{{Prefix: p1, Peer: "c"}, {Prefix: p2, Peer: "nobody"}})
	if !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("Apply with a route for an unknown peer: %v, want ErrUnknownPeer", err)
	}
	if diff := cmp.Diff([]SessionState{{Peer: "c", State: StateIdle}}, sp.Sessions(), cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".Since"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("sessions before Run (-want +got):\n%s", diff)
	}

	runErr := make(chan error, 1)
	go func() { runErr <- sp.Run(ctx) }()
	established := func(after time.Time) SessionState {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case <-sp.Events():
			case <-deadline:
				t.Fatalf("no established session after %v: %+v", after, sp.Sessions())
			}
			if s := sp.Sessions(); len(s) == 1 && s[0].State == StateEstablished && s[0].Since.After(after) {
				return s[0]
			}
		}
	}
	first := established(time.Time{})
	eventually(t, 10*time.Second, func() error {
		if got := col.rib(t); len(got) != 1 || got[p1].LocalPref != 0 {
			return fmt.Errorf("collector has %v, want %s only", got, p1)
		}
		return nil
	})
	if err := New(nil, Options{RouterID: addr("192.0.2.11")}).Apply(ctx, peers, nil); err != nil {
		t.Errorf("Apply before Run: %v", err)
	}

	changed := time.Now()
	peers[0].HoldTime = 9 * time.Second
	if err := sp.Apply(ctx, peers, []Route{{Prefix: p1, Peer: "c"}}); err != nil {
		t.Fatal(err)
	}
	second := established(changed)
	t.Logf("hold time changed: session re-created (established %v, then %v)", first.Since.Format(time.StampMilli), second.Since.Format(time.StampMilli))
	eventually(t, 10*time.Second, func() error {
		if got := col.rib(t); len(got) != 1 {
			return fmt.Errorf("collector has %v after the re-creation", got)
		}
		return nil
	})

	if err := sp.Run(ctx); err == nil {
		t.Error("second Run succeeded")
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Errorf("Run: %v", err)
	}
}
