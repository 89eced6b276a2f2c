package ipamclient

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// TestResume: the client sends no token on its first hello, keeps the token
// of the last plan message, and sends it when it reconnects; the empty
// change that answers it confirms the plan it holds: same plan, same
// generation, and the new replica's acknowledgements grant the right for
// it at once.
func TestResume(t *testing.T) {
	f1, c1, stop1 := serve(t)
	f1.token = "tok-1"
	f2, c2, _ := serve(t)
	f2.resume = true
	g := &grants{ch: make(chan grantCall, 16)}
	c := New([]grpc.ClientConnInterface{c1, c2}, Identity{Tenant: "c1", Node: "n1"}, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{Rights: g, Grace: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	if h := <-f1.hellos; h.GetResumeToken() != "" {
		t.Fatalf("first hello carries token %q, want none", h.GetResumeToken())
	}
	if u := next(t, c); u.Gen != 1 {
		t.Fatalf("first update = %+v", u)
	}
	// A change brings the token of the plan after it.
	f1.push <- &ipamv1.SubscribeResponse{ResumeToken: "tok-2", Body: &ipamv1.SubscribeResponse_Change{Change: &ipamv1.PlanChange{
		UpsertRoutes: []*ipamv1.PlanRoute{{Prefix: "198.51.100.7/32", Peer: "tenants/c1/bgpPeers/p"}},
	}}}
	held := next(t, c)
	stop1()
	if h := <-f2.hellos; h.GetResumeToken() != "tok-2" {
		t.Fatalf("hello after the reconnect carries token %q, want tok-2", h.GetResumeToken())
	}
	u := next(t, c)
	if u.Lost || u.Gen != held.Gen || !u.Plan.Equal(held.Plan) {
		t.Fatalf("update after resuming = %+v, want the held plan (generation %d)", u, held.Gen)
	}
	f2.push <- &ipamv1.SubscribeResponse{HeartbeatAck: &ipamv1.HeartbeatAck{Sequence: 1, ValidFor: durationpb.New(time.Hour)}}
	select {
	case gc := <-g.ch:
		if gc.gen != held.Gen {
			t.Errorf("right after resuming for generation %d, want %d", gc.gen, held.Gen)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no right granted after resuming")
	}
}

// TestChangeBeforeSnapshotIgnored: a session the node did not resume takes
// no change before its snapshot (it would apply to a plan the IPAM did not
// vouch for).
func TestChangeBeforeSnapshotIgnored(t *testing.T) {
	f1, c1, stop1 := serve(t) // no token: the node cannot resume
	f2, c2, _ := serve(t)
	f2.before = []*ipamv1.SubscribeResponse{{Body: &ipamv1.SubscribeResponse_Change{Change: &ipamv1.PlanChange{
		UpsertL2Addresses: []*ipamv1.PlanL2Address{{Address: "198.51.100.99"}},
	}}}}
	c := New([]grpc.ClientConnInterface{c1, c2}, Identity{Tenant: "c1", Node: "n1"}, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{Grace: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	<-f1.hellos
	next(t, c)
	stop1()
	if h := <-f2.hellos; h.GetResumeToken() != "" {
		t.Fatalf("hello carries token %q, want none", h.GetResumeToken())
	}
	// f2 sends a change, then its snapshot: the first update after the
	// reconnect is the snapshot's, without the change.
	u := next(t, c)
	if _, ok := u.Plan.L2[netip.MustParseAddr("192.0.2.100")]; !ok || len(u.Plan.L2) != 1 {
		t.Fatalf("update after the reconnect = %+v, want the snapshot alone", u.Plan.L2)
	}
}

// TestJitter: reconnect waits are spread over [backoff/4, backoff], so a
// node holding its plan retries at least every 250 ms.
func TestJitter(t *testing.T) {
	for _, backoff := range []time.Duration{firstBackoff, 200 * time.Millisecond, fastRetry, 2 * time.Second} {
		lo, hi := backoff, time.Duration(0)
		for range 2000 {
			w := jitter(backoff)
			if w < backoff/4 || w > backoff {
				t.Fatalf("jitter(%v) = %v, want within [%v, %v]", backoff, w, backoff/4, backoff)
			}
			lo, hi = min(lo, w), max(hi, w)
		}
		if spread := hi - lo; spread < backoff/2 {
			t.Errorf("jitter(%v) spread over %v in 2000 draws, want most of [%v, %v]", backoff, spread, backoff/4, backoff)
		}
	}
}
