package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

func newStore(t *testing.T) (*Store, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	emb, err := StartEmbedded(ctx, EmbeddedConfig{Dir: t.TempDir(), LogLevel: "fatal"})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	client, err := Dial(ctx, DialConfig{Endpoints: emb.Endpoints()})
	if err != nil {
		cancel()
		emb.Close()
		t.Fatal(err)
	}
	s := New(client, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{Workers: 2})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		<-done
		_ = client.Close()
		emb.Close()
		cancel()
	})
	return s, ctx
}

func claimChange(addr string, rev int64) ipam.Change {
	a := netip.MustParseAddr(addr)
	ref := ipam.Ref{Kind: ipam.KindClaim, ID: a.String()}
	return ipam.Change{
		Conds: []ipam.Cond{{Ref: ref, Rev: rev}},
		Puts:  []ipam.Put{{Ref: ref, Value: &ipam.Claim{Addr: a, Pool: "p", Tenant: "t"}}},
	}
}

// Many concurrent changes, some of which conflict: exactly one writer per
// address wins, and every loser learns the winner's state in the answer.
func TestGroupCommitConflictsArePerChange(t *testing.T) {
	s, ctx := newStore(t)
	const writers, addrs = 64, 8
	type outcome struct {
		addr  string
		err   error
		fresh []ipam.Event
	}
	out := make(chan outcome, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := fmt.Sprintf("192.0.2.%d", i%addrs)
			_, fresh, err := s.Commit(ctx, claimChange(addr, 0))
			out <- outcome{addr, err, fresh}
		}()
	}
	wg.Wait()
	close(out)
	wins := map[string]int{}
	for o := range out {
		switch {
		case o.err == nil:
			wins[o.addr]++
		case errors.Is(o.err, ipam.ErrConflict):
			if len(o.fresh) != 1 || o.fresh[0].Value == nil {
				t.Errorf("loser for %s got no current state: %+v", o.addr, o.fresh)
			}
		default:
			t.Errorf("unexpected error: %v", o.err)
		}
	}
	want := map[string]int{}
	for i := range addrs {
		want[fmt.Sprintf("192.0.2.%d", i)] = 1
	}
	if diff := cmp.Diff(want, wins); diff != "" {
		t.Fatalf("winners per address (-want +got):\n%s", diff)
	}
}

func TestRangeConditionAndReads(t *testing.T) {
	s, ctx := newStore(t)
	rev, _, err := s.Commit(ctx, claimChange("192.0.2.10", 0))
	if err != nil {
		t.Fatal(err)
	}
	from := ipam.Ref{Kind: ipam.KindClaim, ID: "192.0.2.0"}
	to := ipam.Ref{Kind: ipam.KindClaim, ID: "192.0.2.255"}
	claims, err := s.ClaimsIn(ctx, from, to, 0)
	if err != nil || len(claims) != 1 || claims[0].Rev != rev {
		t.Fatalf("ClaimsIn = %v, %v", claims, err)
	}
	// Nothing changed in the range since rev: the guarded change commits.
	pool := ipam.Ref{Kind: ipam.KindPool, ID: "p"}
	guarded := func(since int64) ipam.Change {
		return ipam.Change{
			Puts:      []ipam.Put{{Ref: pool, Value: &ipam.Pool{Name: "p"}}},
			Unchanged: []ipam.RangeCond{{From: from, To: to, Since: since}},
		}
	}
	if _, _, err := s.Commit(ctx, guarded(rev)); err != nil {
		t.Fatalf("unchanged range refused: %v", err)
	}
	if _, _, err := s.Commit(ctx, claimChange("192.0.2.20", 0)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Commit(ctx, guarded(rev)); !errors.Is(err, ipam.ErrConflict) {
		t.Fatalf("changed range not detected: %v", err)
	}
	// Reads: Get, List with paging.
	if _, err := s.Get(ctx, ipam.Ref{Kind: ipam.KindPool, ID: "missing"}); !errors.Is(err, ipam.ErrNotFound) {
		t.Fatalf("Get missing = %v", err)
	}
	page, err := s.List(ctx, ipam.KindClaim, "", "", 1, 0)
	if err != nil || len(page.Items) != 1 || !page.More {
		t.Fatalf("List page 1 = %+v, %v", page, err)
	}
	page2, err := s.List(ctx, ipam.KindClaim, "", page.Items[0].Ref.ID, 10, page.Revision)
	if err != nil || len(page2.Items) != 1 || page2.More {
		t.Fatalf("List page 2 = %+v, %v", page2, err)
	}
}

func TestWatchStateAndCompaction(t *testing.T) {
	s, ctx := newStore(t)
	_, rev, err := s.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	got := make(chan ipam.Event, 10)
	go func() {
		_ = s.WatchState(wctx, rev, nil, func(evs []ipam.Event, _ int64) {
			for _, ev := range evs {
				got <- ev
			}
		})
	}()
	crev, _, err := s.Commit(ctx, claimChange("192.0.2.1", 0))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-got:
		if ev.Rev != crev || ev.Value.(*ipam.Claim).Addr != netip.MustParseAddr("192.0.2.1") {
			t.Fatalf("watched %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}
	cancel()
	crev, _, err = s.Commit(ctx, claimChange("192.0.2.2", 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Compact(ctx, crev); err != nil {
		t.Fatal(err)
	}
	err = s.WatchState(ctx, rev, nil, func([]ipam.Event, int64) {})
	if !errors.Is(err, ipam.ErrResumeTooOld) {
		t.Fatalf("watch from a compacted revision = %v, want ErrResumeTooOld", err)
	}
}

// The state watch passes on this store's own writes as they were committed
// (no decoding), and decodes everyone else's: both arrive equal.
func TestWatchPassesOwnWritesOn(t *testing.T) {
	s, ctx := newStore(t)
	other := New(&Client{etcd: s.client, kv: s.conn.kv}, s.logger, Options{Workers: 1})
	octx, stopOther := context.WithCancel(ctx)
	defer stopOther()
	go func() { _ = other.Run(octx) }()
	_, rev, err := s.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := claimChange("192.0.2.10", 0), claimChange("192.0.2.11", 0)
	if _, _, err := s.Commit(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Commit(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var got []ipam.Event
	err = s.WatchState(wctx, rev, nil, func(evs []ipam.Event, _ int64) {
		got = append(got, evs...)
		if len(got) >= 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("watch = %v", err)
	}
	if got[0].Value != mine.Puts[0].Value {
		t.Errorf("own write: got a decoded copy, want the committed value itself")
	}
	if got[1].Value == theirs.Puts[0].Value {
		t.Errorf("another store's write: got its value itself, want it decoded")
	}
	if diff := cmp.Diff([]any{mine.Puts[0].Value, theirs.Puts[0].Value}, []any{got[0].Value, got[1].Value}, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
}
