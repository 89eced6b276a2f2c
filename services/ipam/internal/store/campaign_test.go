package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// A change carrying the fence Campaign hands its leader commits while the
// leader's lease lasts. Once the lease is gone (revoked here, as it runs
// out while the leader is paused) the change fails with a conflict, though
// its other conditions hold, and the leader's context ends.
func TestCampaignFence(t *testing.T) {
	s, ctx := newStore(t)
	type led struct {
		ctx   context.Context
		fence ipam.Cond
	}
	leading := make(chan led, 1)
	release := make(chan struct{})
	done := make(chan error, 1)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		done <- s.Campaign(cctx, "fenced", "r1", func(lctx context.Context, fence ipam.Cond) error {
			select {
			case leading <- led{lctx, fence}:
			default:
				return nil // the second term: not under test
			}
			<-release
			return nil
		})
	}()
	var l led
	select {
	case l = <-leading:
	case <-ctx.Done():
		t.Fatal("not elected")
	}
	if l.fence.Ref.Kind != ipam.KindLeadership || !strings.HasPrefix(l.fence.Ref.ID, "fenced/") || l.fence.Rev == 0 {
		t.Fatalf("fence %+v, want the key fenced/LEASE at its revision", l.fence)
	}
	put := func(addr string) (int64, []ipam.Event, error) {
		ch := claimChange(addr, 0)
		ch.Conds = append(ch.Conds, l.fence)
		return s.Commit(ctx, ch)
	}
	if _, _, err := put("192.0.2.1"); err != nil {
		t.Fatalf("a fenced change while leading: %v", err)
	}
	// A conflict on another condition reads the fence's key too: its value
	// is the holder's ID, written raw by etcd's election recipe.
	_, fresh, err := put("192.0.2.1")
	if !errors.Is(err, ipam.ErrConflict) {
		t.Fatalf("a fenced change on a taken address: %v, want a conflict", err)
	}
	var holder *ipam.Leadership
	for _, ev := range fresh {
		if ev.Ref == l.fence.Ref {
			holder, _ = ev.Value.(*ipam.Leadership)
		}
	}
	if diff := cmp.Diff(&ipam.Leadership{Holder: "r1"}, holder); diff != "" {
		t.Fatalf("the fence's current state (-want +got):\n%s", diff)
	}
	lease, err := strconv.ParseInt(strings.TrimPrefix(l.fence.Ref.ID, "fenced/"), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Revoke(ctx, clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	_, fresh, err = put("192.0.2.2")
	if !errors.Is(err, ipam.ErrConflict) {
		t.Fatalf("a fenced change after the lease is gone: %v, want a conflict", err)
	}
	for _, ev := range fresh {
		if ev.Ref == l.fence.Ref && ev.Value != nil {
			t.Fatalf("the fence's key after the lease is gone: %+v", ev.Value)
		}
	}
	select {
	case <-l.ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the leader's context outlived its lease by 30 s")
	}
	close(release)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Campaign: %v", err)
	}
}
