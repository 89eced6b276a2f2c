package fleet

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/addrspace"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// recordOwners writes the owners of many addresses in chunks committed
// concurrently, to a real etcd: every address gets exactly one record; when
// a node leaves, its addresses all move to the node left, and no other
// record is touched; a replica working from stale records (it lost the
// election and missed the newer ones) writes nothing.
func TestRecordOwnersConcurrently(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: t.TempDir(), LogLevel: "fatal"})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	logger := slog.New(slog.DiscardHandler)
	st := store.New(emb.Client(), logger, store.Options{Workers: ownerWriters})
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = st.Run(runCtx) })
	defer func() { stop(); wg.Wait() }()

	const n = 1000 // 16 chunks
	state := NewState()
	base := netip.MustParseAddr("2001:db8:1::")
	last := base
	for range n - 1 {
		last = last.Next()
	}
	up := []ipam.Interface{{Name: "eth0", Up: true}}
	evs := []ipam.Event{
		{Ref: ipam.Ref{Kind: ipam.KindPool, ID: "p"}, Value: &ipam.Pool{Name: "p", Ranges: []addrspace.Range{{From: base, To: last}}, Tenants: []string{"t"}}},
		{Ref: ipam.Ref{Kind: ipam.KindL2Advertisement, ID: "t/l2"}, Value: &ipam.L2Advertisement{Tenant: "t", ID: "l2", Pools: []string{"p"}}},
		{Ref: ipam.Ref{Kind: ipam.KindNode, ID: "t/n1"}, Value: &ipam.Node{Tenant: "t", Name: "n1", Live: true, Interfaces: up}},
		{Ref: ipam.Ref{Kind: ipam.KindNode, ID: "t/n2"}, Value: &ipam.Node{Tenant: "t", Name: "n2", Live: true, Interfaces: up}},
	}
	addr := base
	for range n {
		id := "a" + addr.String()
		evs = append(evs, ipam.Event{Ref: ipam.Ref{Kind: ipam.KindAllocation, ID: "t/" + id}, Value: &ipam.Allocation{Tenant: "t", ID: id, Pool: "p", Addrs: []netip.Addr{addr}}})
		addr = addr.Next()
	}
	state.Apply(evs, 1)
	h := NewHub(state, st, logger)

	// owners reads the records back, and feeds them to the state as the
	// watch would.
	owners := func() map[string]int {
		t.Helper()
		page, err := st.List(ctx, ipam.KindL2Owner, "t/", "", 2*n, 0)
		if err != nil {
			t.Fatal(err)
		}
		state.Apply(page.Items, page.Revision)
		count := map[string]int{}
		for _, ev := range page.Items {
			count[ev.Value.(*ipam.L2Owner).Node]++
		}
		return count
	}
	in, revs := state.Input("t")
	if err := h.recordOwners(ctx, "t", in, revs); err != nil {
		t.Fatal(err)
	}
	first := owners()
	if first["n1"]+first["n2"] != n || len(first) != 2 {
		t.Fatalf("owners after the first recording: %v, want %d addresses over n1 and n2", first, n)
	}
	stale, staleRevs := state.Input("t")
	state.Apply([]ipam.Event{{Ref: ipam.Ref{Kind: ipam.KindNode, ID: "t/n1"}, Deleted: true}}, 2)
	in, revs = state.Input("t")
	if err := h.recordOwners(ctx, "t", in, revs); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"n2": n}, owners()); diff != "" {
		t.Fatalf("owners once n1 left (-want +got):\n%s", diff)
	}
	// A replica that records the same move from the records before it
	// (it lost the election and missed the newer ones) is refused.
	for i, nd := range stale.Nodes {
		if nd.Name == "n1" {
			stale.Nodes = append(stale.Nodes[:i], stale.Nodes[i+1:]...)
			break
		}
	}
	if err := h.recordOwners(ctx, "t", stale, staleRevs); !errors.Is(err, ipam.ErrConflict) {
		t.Errorf("recording from stale records: %v, want a conflict", err)
	}
	if diff := cmp.Diff(map[string]int{"n2": n}, owners()); diff != "" {
		t.Errorf("owners after a stale recording (-want +got):\n%s", diff)
	}
}
