package store

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// A watch far behind catches up in batches of at most 1,000 revisions, each
// sent with etcd's current revision in its header. Cut after the first batch
// and resumed from the progress it reported, it must still deliver every
// event: progress is the last delivered event's revision, not the header's.
func TestWatchResumedMidCatchUpMissesNothing(t *testing.T) {
	s, ctx := newStore(t)
	_, start, err := s.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const writes = 2500 // more than two of etcd's catch-up batches
	for i := range writes {
		a := netip.AddrFrom4([4]byte{198, 51, byte(100 + i/256), byte(i % 256)})
		ref := ipam.Ref{Kind: ipam.KindClaim, ID: a.String()}
		b, err := encode(ipam.KindClaim, &ipam.Claim{Addr: a, Pool: "p", Tenant: "t"})
		if err != nil {
			t.Fatal(err)
		}
		// One revision per write, written behind the store's back so that
		// the watch decodes every one.
		if _, err := s.client.Put(ctx, key(ref), string(b)); err != nil {
			t.Fatal(err)
		}
	}
	seen := make(map[string]bool)
	after, cuts := start, 0
	for len(seen) < writes {
		if cuts > writes {
			t.Fatalf("no progress after %d cuts: %d of %d events", cuts, len(seen), writes)
		}
		wctx, cancel := context.WithCancel(ctx)
		err := s.WatchState(wctx, after, nil, func(evs []ipam.Event, rev int64) {
			for _, ev := range evs {
				seen[ev.Ref.ID] = true
			}
			after = rev
			cancel() // cut after every response: resume from what it reported
		})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("watch = %v", err)
		}
		cuts++
		cur, err := s.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after >= cur && len(seen) < writes {
			t.Fatalf("after %d cuts the watch reports progress %d (etcd at %d) but delivered %d of %d events", cuts, after, cur, len(seen), writes)
		}
	}
	// etcd usually sends the catch-up in batches of 1,000 revisions, which
	// is what makes the cuts land mid catch-up; when it sends more at once,
	// the property still held but was tested less hard.
	if cuts < 3 {
		t.Logf("caught up in %d responses: fewer cuts mid catch-up than intended", cuts)
	}
}

// A state watch learns etcd's revision from a progress request even when
// the last writes are outside the state and another watch of the same
// client starts after the current revision: etcd sends no progress on a
// stream holding such a watch, so the state watch must be on a stream of
// its own (a fresh ipamd's listing waited out its deadline for the L2
// owners' election key, with the fleet's watches opened at the next
// revision).
func TestStateWatchProgressPastAFutureWatch(t *testing.T) {
	s, ctx := newStore(t)
	_, start, err := s.LoadState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A write outside the state.
	if _, err := s.client.Put(ctx, root+"elsewhere", "x"); err != nil {
		t.Fatal(err)
	}
	cur, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Another watch as the store opens them (WatchKind), starting after
	// the current revision; wait until etcd has it.
	other := s.client.Watch(clientv3.WithRequireLeader(wctx), kindPrefix(ipam.KindNode), clientv3.WithPrefix(), clientv3.WithRev(cur+1000), clientv3.WithCreatedNotify())
	if resp := <-other; !resp.Created {
		t.Fatalf("the other watch: %+v", resp)
	}
	progress := make(chan int64, 100)
	go func() {
		_ = s.WatchState(wctx, start, nil, func(_ []ipam.Event, rev int64) { progress <- rev })
	}()
	deadline := time.After(10 * time.Second)
	for {
		if err := s.RequestProgress(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case rev := <-progress:
			if rev >= cur {
				return
			}
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("the state watch never reported revision %d (it started after %d)", cur, start)
		}
	}
}
