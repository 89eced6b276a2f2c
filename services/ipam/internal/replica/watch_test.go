package replica_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

// watcher reads a WatchAllocations stream.
type watcher struct {
	t      *testing.T
	stream ipamv1.AllocationService_WatchAllocationsClient
	cancel context.CancelFunc
}

func watch(t *testing.T, n *node, parent, token string) *watcher {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	stream, err := n.allocs.WatchAllocations(ctx, &ipamv1.WatchAllocationsRequest{Parent: parent, ResumeToken: token})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return &watcher{t: t, stream: stream, cancel: cancel}
}

func (w *watcher) recv() *ipamv1.WatchAllocationsResponse {
	w.t.Helper()
	msg, err := w.stream.Recv()
	if err != nil {
		w.t.Fatalf("watch: %v", err)
	}
	return msg
}

// event is an event as "TYPE owner addresses".
func event(ev *ipamv1.AllocationEvent) string {
	return fmt.Sprintf("%s %s %v", ev.GetType().String()[len("TYPE_"):], ev.GetAllocation().GetOwner(), ev.GetAllocation().GetAddresses())
}

// changes reads messages until it has n events; it returns them and the
// resume token of the message that carried the last one.
func (w *watcher) changes(n int) ([]string, string) {
	w.t.Helper()
	var out []string
	token := ""
	for len(out) < n {
		msg := w.recv()
		if msg.GetSnapshotComplete() {
			w.t.Fatalf("snapshot_complete on a change message")
		}
		for _, ev := range msg.GetEvents() {
			out = append(out, event(ev))
		}
		token = msg.GetResumeToken()
	}
	return out, token
}

func TestWatchAllocations(t *testing.T) {
	n := startNode(t, sharedEtcd(t, "watch").client, replica.Options{})
	const tenant = "watch"
	mustPool(t, n, "watch-v6", &ipamv1.Pool{Ranges: []string{"2001:db8:30::/64"}, Tenants: []string{tenant, "watch-other"}})
	mustPool(t, n, "watch-v4", &ipamv1.Pool{Ranges: []string{"192.0.2.128/29"}, Tenants: []string{tenant, "watch-other"}, AutoAssign: boolp(false)})

	// More allocations than one snapshot message carries.
	const existing = 205
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if _, err := allocate(ctxT(t), n, tenant, &ipamv1.Allocation{Owner: fmt.Sprintf("old-%03d", i)}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for i := range existing {
		work <- i
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	w := watch(t, n, "tenants/"+tenant, "")
	seen := map[string][]string{} // owner: addresses
	var sizes []int
	for {
		msg := w.recv()
		sizes = append(sizes, len(msg.GetEvents()))
		for _, ev := range msg.GetEvents() {
			if ev.GetType() != ipamv1.AllocationEvent_TYPE_EXISTING {
				t.Fatalf("snapshot event %s", event(ev))
			}
			seen[ev.GetAllocation().GetOwner()] = ev.GetAllocation().GetAddresses()
		}
		// Only the whole snapshot can be resumed after.
		if hasToken := msg.GetResumeToken() != ""; hasToken != msg.GetSnapshotComplete() {
			t.Errorf("snapshot message with snapshot_complete %v has resume_token %q", msg.GetSnapshotComplete(), msg.GetResumeToken())
		}
		if msg.GetSnapshotComplete() {
			break
		}
	}
	diff(t, "snapshot message sizes", []int{200, 5}, sizes)
	if len(seen) != existing {
		t.Fatalf("snapshot has %d owners, want %d", len(seen), existing)
	}

	// Changes, in commit order; another tenant's are not seen.
	mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "new-1", RequestedPool: "pools/watch-v4"})
	mustAllocate(t, n, "watch-other", &ipamv1.Allocation{Owner: "elsewhere", RequestedPool: "pools/watch-v4"})
	releaseOwner(t, n, tenant, "old-007")
	got, token := w.changes(2)
	diff(t, "changes", []string{
		"PUT new-1 [192.0.2.128]",
		fmt.Sprintf("DELETED old-007 %v", seen["old-007"]),
	}, got)
	w.cancel()

	// Resuming continues after the token without repeating anything.
	releaseOwner(t, n, tenant, "new-1")
	mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "new-2", RequestedPool: "pools/watch-v4"})
	resumed := watch(t, n, "tenants/"+tenant, token)
	got, _ = resumed.changes(2)
	diff(t, "after resuming", []string{
		"DELETED new-1 [192.0.2.128]",
		"PUT new-2 [192.0.2.128]",
	}, got)

	// Every tenant at once, from the same token.
	mustAllocate(t, n, "watch-other", &ipamv1.Allocation{Owner: "elsewhere-2", RequestedPool: "pools/watch-v4"})
	got, _ = watch(t, n, "tenants/-", token).changes(3)
	diff(t, "all tenants", []string{
		"DELETED new-1 [192.0.2.128]",
		"PUT new-2 [192.0.2.128]",
		"PUT elsewhere-2 [192.0.2.130]",
	}, got)
}

// A resume token older than etcd's compaction cannot be resumed from.
func TestWatchResumeAfterCompaction(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	const tenant = "compact"
	mustPool(t, n, "compact", &ipamv1.Pool{Ranges: []string{"192.0.2.0/29"}, Tenants: []string{tenant}})
	mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "c1"})
	w := watch(t, n, "tenants/"+tenant, "")
	msg := w.recv()
	if !msg.GetSnapshotComplete() || len(msg.GetEvents()) != 1 {
		t.Fatalf("snapshot %v", msg)
	}
	token := msg.GetResumeToken()
	w.cancel()

	mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "c2"})
	mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "c3"})
	resp, err := env.client.Etcd().Get(ctxT(t), "compaction-probe")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.client.Etcd().Compact(ctxT(t), resp.Header.Revision); err != nil {
		t.Fatal(err)
	}

	_, err = watch(t, n, "tenants/"+tenant, token).stream.Recv()
	wantStatus(t, err, codes.OutOfRange)
	if got := reason(err); got != "RESUME_TOKEN_TOO_OLD" {
		t.Errorf("reason %q, want RESUME_TOKEN_TOO_OLD", got)
	}
	// Without a token the stream starts again with a snapshot.
	msg = watch(t, n, "tenants/"+tenant, "").recv()
	if !msg.GetSnapshotComplete() || len(msg.GetEvents()) != 3 {
		t.Fatalf("fresh snapshot %v", msg)
	}
}
