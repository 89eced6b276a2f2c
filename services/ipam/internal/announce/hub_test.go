package announce

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// A session's first plan waits for its node's registration to reach the
// state: an empty snapshot would make a reconnecting announcer withdraw
// everything. Once it has had a plan, the node going away empties it.
func TestFirstPlanWaitsForRegistration(t *testing.T) {
	st := NewState()
	h := NewHub(st, nil, slog.New(slog.DiscardHandler))
	peer := &ipam.BGPPeer{Tenant: "t", ID: "r1", MyASN: 64512, PeerASN: 64512, PeerAddress: netip.MustParseAddr("192.0.2.1")}
	node := &ipam.Node{Tenant: "t", Name: "n1", Live: true}
	st.Apply([]ipam.Event{{Ref: ipam.Ref{Kind: ipam.KindBGPPeer, ID: "t/r1"}, Value: peer, Rev: 1}}, 1)
	s := h.Attach("t", "n1")
	ctx := context.Background()
	next := func() (*ipam.NodePlan, bool) {
		t.Helper()
		if err := h.plan(ctx, "t"); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		snap, delta, ok := s.Next(wctx)
		if delta != nil {
			return &ipam.NodePlan{Peers: delta.UpsertPeers}, ok
		}
		return snap, ok
	}
	if p, ok := next(); ok {
		t.Fatalf("unregistered node got a first plan: %+v", p)
	}
	st.Apply([]ipam.Event{{Ref: ipam.Ref{Kind: ipam.KindNode, ID: "t/n1"}, Value: node, Rev: 2}}, 2)
	p, ok := next()
	if !ok || len(p.Peers) != 1 {
		t.Fatalf("registered node's first plan: %+v, %v; want its peer", p, ok)
	}
	st.Apply([]ipam.Event{{Ref: ipam.Ref{Kind: ipam.KindNode, ID: "t/n1"}, Deleted: true, Rev: 3}}, 3)
	if err := h.plan(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, delta, ok := s.Next(wctx)
	if !ok || delta == nil || len(delta.RemovePeers) != 1 {
		t.Fatalf("node gone: change %+v, %v; want its peer removed", delta, ok)
	}
}
