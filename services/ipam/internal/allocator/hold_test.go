package allocator_test

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/addrspace"
	"github.com/beaconlb/beacon/services/ipam/internal/allocator"
	"github.com/beaconlb/beacon/services/ipam/internal/index"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// startStore runs a store over a real embedded etcd for one test.
func startStore(t *testing.T) (*store.Store, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: t.TempDir(), LogLevel: "fatal"})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(emb.Client(), discard(), store.Options{})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = st.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done; emb.Close() })
	return st, ctx
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// loaded returns an index loaded from the store, fed by nothing else than
// its own allocator's commits: a replica whose watch has not delivered
// anything since.
func loaded(t *testing.T, ctx context.Context, st *store.Store) *index.Index {
	t.Helper()
	evs, rev, err := st.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	x := index.New()
	x.Replace(evs, rev)
	return x
}

// An owner released with a hold through one replica, then allocated again
// through another whose index has not seen the hold yet, gets its held
// address back: the new allocation is conditioned on the owner having no
// hold, so the second replica learns of it instead of handing out a new
// address and leaving the held one to leak until the hold ends.
func TestAllocateSeesHoldUnseenByIndex(t *testing.T) {
	st, ctx := startStore(t)
	idxA := loaded(t, ctx, st)
	a := allocator.New(idxA, st, discard(), allocator.Options{})
	r, err := addrspace.ParseRange("192.0.2.0/29")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreatePool(ctx, &ipam.Pool{Name: "web", AutoAssign: true, Ranges: []addrspace.Range{r}}, false, allocator.Meta{}); err != nil {
		t.Fatal(err)
	}
	first, err := a.Allocate(ctx, &ipam.Allocation{Tenant: "c1", Owner: "svc"}, allocator.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	b := allocator.New(loaded(t, ctx, st), st, discard(), allocator.Options{})

	hold := time.Hour
	if _, err := a.Release(ctx, "c1", first.Allocation.ID, 0, &hold, allocator.Meta{}); err != nil {
		t.Fatal(err)
	}
	again, err := b.Allocate(ctx, &ipam.Allocation{Tenant: "c1", Owner: "svc"}, allocator.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Allocation.Addrs, first.Allocation.Addrs) {
		t.Errorf("allocated %v through the lagging replica, want the held %v", again.Allocation.Addrs, first.Allocation.Addrs)
	}
	page, err := st.List(ctx, ipam.KindHold, "", "", 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 0 {
		t.Errorf("holds left: %+v", page.Items)
	}
	claims, err := st.ClaimsIn(ctx, ipam.ClaimRef(netip.MustParseAddr("192.0.2.0")), ipam.ClaimRef(netip.MustParseAddr("192.0.2.7")), 0)
	if err != nil {
		t.Fatal(err)
	}
	var claimed []netip.Addr
	for _, ev := range claims {
		claimed = append(claimed, ev.Value.(*ipam.Claim).Addr)
	}
	if !slices.Equal(claimed, first.Allocation.Addrs) {
		t.Errorf("claimed %v, want only %v", claimed, first.Allocation.Addrs)
	}
}
