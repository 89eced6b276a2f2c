package allocator

import (
	"context"
	"fmt"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/index"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// listWait bounds how long a listing waits for the index to catch up with
// etcd when its request has no deadline; listMargin is what a deadline
// keeps for the answer to reach the caller.
const (
	listWait   = 2 * time.Second
	listMargin = 50 * time.Millisecond
)

// Allocations returns a page of the allocations the replica's index holds
// (see index.Index.Allocations). Call CaughtUp first.
func (a *Allocator) Allocations(q index.AllocationQuery) index.AllocationPage {
	return a.idx.Allocations(q)
}

// Readable fails unless the replica could decode every allocation of the
// tenant ("-": of all tenants) that etcd holds: the watch skips (and logs)
// a value it cannot decode, and a listing from the index would leave it
// out unsaid. Call it after CaughtUp.
func (a *Allocator) Readable(tenant string) error {
	prefix := tenant + "/"
	if tenant == "-" {
		prefix = ""
	}
	if a.store.Unreadable(ipam.KindAllocation, prefix) {
		return fmt.Errorf("allocator: an allocation under %q could not be decoded (see the watch's warning)", prefix)
	}
	return nil
}

// CaughtUp returns once the index has seen every change etcd had committed
// when it was called: a listing from the index then reflects every write
// that completed before it began, whichever replica made it.
func (a *Allocator) CaughtUp(ctx context.Context) error { return a.caughtUpForListing(ctx) }

// caughtUpForListing reads etcd's revision (a linearizable read) and waits
// until the index has seen every change up to it: until the request's
// deadline (less listMargin), or listWait without one. It fails with
// ipam.ErrUnavailable if the index does not catch up in that time.
func (a *Allocator) caughtUpForListing(ctx context.Context) error {
	rev, err := a.store.Revision(ctx)
	if err != nil {
		return err
	}
	if a.idx.Progress() >= rev {
		return nil
	}
	var wctx context.Context
	var cancel context.CancelFunc
	if dl, ok := ctx.Deadline(); ok {
		wctx, cancel = context.WithDeadline(ctx, dl.Add(-listMargin))
	} else {
		wctx, cancel = context.WithTimeout(ctx, listWait)
	}
	defer cancel()
	if a.awaitProgress(wctx, rev) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("allocator: index behind etcd revision %d: %w", rev, ipam.ErrUnavailable)
}
