package ipamclient

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// fakeIPAM serves Subscribe: it sends a snapshot, then whatever the test
// pushes, and records heartbeats and status.
type fakeIPAM struct {
	ipamv1.UnimplementedAnnouncerServiceServer
	push   chan *ipamv1.SubscribeResponse
	hellos chan *ipamv1.SubscribeHello
	status chan *ipamv1.AnnouncerStatus
	beats  atomic.Int64
	// token goes with the snapshot; with resume set, a hello carrying a
	// token is answered with an empty change (the node is current) instead.
	token  string
	resume bool
	// before is sent ahead of the first plan message.
	before []*ipamv1.SubscribeResponse
}

func (f *fakeIPAM) Subscribe(stream ipamv1.AnnouncerService_SubscribeServer) error {
	m, err := stream.Recv()
	if err != nil {
		return err
	}
	f.hellos <- m.GetHello()
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			if st := m.GetStatus(); st != nil {
				f.status <- st
			}
			if m.GetHeartbeat() != nil {
				f.beats.Add(1)
			}
		}
	}()
	first := &ipamv1.SubscribeResponse{ResumeToken: f.token, Body: &ipamv1.SubscribeResponse_Snapshot{Snapshot: &ipamv1.Plan{
		L2Addresses: []*ipamv1.PlanL2Address{{Address: "192.0.2.100"}},
	}}}
	if tok := m.GetHello().GetResumeToken(); f.resume && tok != "" {
		first = &ipamv1.SubscribeResponse{ResumeToken: tok, Body: &ipamv1.SubscribeResponse_Change{Change: &ipamv1.PlanChange{}}}
	}
	for _, r := range f.before {
		if err := stream.Send(r); err != nil {
			return err
		}
	}
	if err := stream.Send(first); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case r, ok := <-f.push:
			if !ok {
				return nil // end the session
			}
			if err := stream.Send(r); err != nil {
				return err
			}
		}
	}
}

func serve(t *testing.T) (*fakeIPAM, *grpc.ClientConn, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeIPAM{push: make(chan *ipamv1.SubscribeResponse, 4), hellos: make(chan *ipamv1.SubscribeHello, 4), status: make(chan *ipamv1.AnnouncerStatus, 16)}
	gs := grpc.NewServer()
	ipamv1.RegisterAnnouncerServiceServer(gs, f)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return f, conn, gs.Stop
}

func next(t *testing.T, c *Client) Update {
	t.Helper()
	select {
	case u := <-c.Updates():
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no update")
	}
	return Update{}
}

func TestSnapshotChangesReconnectAndGrace(t *testing.T) {
	f1, c1, stop1 := serve(t)
	f2, c2, stop2 := serve(t)
	c := New([]grpc.ClientConnInterface{c1, c2}, Identity{Tenant: "c1", Node: "n1"}, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{Grace: 300 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()

	if h := <-f1.hellos; h.GetParent() != "tenants/c1" || h.GetNode() != "n1" {
		t.Fatalf("hello = %v", h)
	}
	vip := netip.MustParseAddr("192.0.2.100")
	if u := next(t, c); u.Lost || u.Plan.L2[vip] == nil && len(u.Plan.L2) != 1 {
		t.Fatalf("first update = %+v", u)
	}
	f1.push <- &ipamv1.SubscribeResponse{Body: &ipamv1.SubscribeResponse_Change{Change: &ipamv1.PlanChange{
		UpsertL2Addresses: []*ipamv1.PlanL2Address{{Address: "192.0.2.101", Interfaces: []string{"eth0"}}},
		RemoveL2Addresses: []string{"192.0.2.100"},
	}}}
	u := next(t, c)
	if _, ok := u.Plan.L2[vip]; ok || len(u.Plan.L2) != 1 {
		t.Fatalf("change not applied: %v", u.Plan.L2)
	}
	c.SetStatus(&ipamv1.AnnouncerStatus{Announced: []*ipamv1.AnnouncedAddress{{Address: "192.0.2.101"}}})
	select {
	case st := <-f1.status:
		if st.GetAnnounced()[0].GetAddress() != "192.0.2.101" {
			t.Fatalf("status = %v", st)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("status not sent")
	}

	// The first IPAM goes away: the client resumes with the second.
	stop1()
	<-f2.hellos
	if u := next(t, c); u.Lost {
		t.Fatalf("lost while a replica answers: %+v", u)
	}
	// Every IPAM gone for longer than the grace period: Lost.
	stop2()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case u := <-c.Updates():
			if u.Lost {
				return
			}
		case <-deadline:
			t.Fatal("never reported lost")
		}
	}
}

// The IPAM's own heartbeats repeat the interval; they must not stop the
// announcer's heartbeats (which would make the IPAM end the session).
func TestHeartbeatsKeepFlowingWhileTheIPAMSendsItsOwn(t *testing.T) {
	f, conn, _ := serve(t)
	c := New([]grpc.ClientConnInterface{conn}, Identity{Tenant: "c1", Node: "n1"}, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	<-f.hellos
	next(t, c)
	hb := durationpb.New(100 * time.Millisecond)
	stop := time.After(time.Second)
	tick := time.NewTicker(40 * time.Millisecond)
	defer tick.Stop()
	before := f.beats.Load()
	for done := false; !done; {
		select {
		case <-tick.C:
			f.push <- &ipamv1.SubscribeResponse{HeartbeatInterval: hb}
		case <-stop:
			done = true
		}
	}
	if got := f.beats.Load() - before; got < 5 {
		t.Fatalf("the announcer sent %d heartbeats in a second at a 100ms interval", got)
	}
}

// grants records the rights a Client grants.
type grants struct {
	ch     chan grantCall
	closed atomic.Bool
}

type grantCall struct {
	gen   uint64
	until time.Time
}

func (g *grants) Grant(gen uint64, until time.Time) { g.ch <- grantCall{gen, until} }
func (g *grants) Close()                            { g.closed.Store(true) }

// TestRightsFromAcks: an acknowledged heartbeat grants a right for the plan
// received so far, counted from when that heartbeat was sent; a plan whose
// L2 addresses are unchanged keeps its generation (its right counts at
// once), a new L2 set makes a new one; closing the client gives the right
// up.
func TestRightsFromAcks(t *testing.T) {
	f, conn, _ := serve(t)
	g := &grants{ch: make(chan grantCall, 16)}
	c := New([]grpc.ClientConnInterface{conn}, Identity{Tenant: "c1", Node: "n1"}, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{Rights: g})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	<-f.hellos
	first := next(t, c)
	if first.Gen != 1 {
		t.Fatalf("first plan's generation %d, want 1", first.Gen)
	}
	ack := func(seq uint64) {
		f.push <- &ipamv1.SubscribeResponse{HeartbeatAck: &ipamv1.HeartbeatAck{Sequence: seq, ValidFor: durationpb.New(time.Hour)}}
	}
	grant := func() grantCall {
		t.Helper()
		select {
		case gc := <-g.ch:
			return gc
		case <-time.After(10 * time.Second):
			t.Fatal("no grant")
		}
		return grantCall{}
	}
	// The fake acknowledges heartbeats only when told to; sequence 1 was
	// sent right after the snapshot.
	ack(1)
	if gc := grant(); gc.gen != 1 || time.Until(gc.until) < 50*time.Minute || time.Until(gc.until) > time.Hour {
		t.Fatalf("grant for heartbeat 1 = %+v, want generation 1 until about an hour from its sending", gc)
	}
	// A route-only change keeps the generation.
	f.push <- &ipamv1.SubscribeResponse{Body: &ipamv1.SubscribeResponse_Change{Change: &ipamv1.PlanChange{
		UpsertRoutes: []*ipamv1.PlanRoute{{Prefix: "198.51.100.7/32", Peer: "tenants/c1/bgpPeers/p"}},
	}}}
	if u := next(t, c); u.Gen != 1 {
		t.Fatalf("a route-only change made generation %d, want 1", u.Gen)
	}
	// An L2 change makes a new one, and the next grant is for it.
	f.push <- &ipamv1.SubscribeResponse{Body: &ipamv1.SubscribeResponse_Change{Change: &ipamv1.PlanChange{
		UpsertL2Addresses: []*ipamv1.PlanL2Address{{Address: "192.0.2.101"}},
	}}}
	if u := next(t, c); u.Gen != 2 {
		t.Fatalf("an L2 change made generation %d, want 2", u.Gen)
	}
	ack(1) // a repeat (a stopping replica's farewell) still counts
	if gc := grant(); gc.gen != 2 {
		t.Fatalf("grant after the L2 change = %+v, want generation 2", gc)
	}
	cancel()
	<-done
	if !g.closed.Load() {
		t.Error("the client stopped without giving its right up")
	}
}
