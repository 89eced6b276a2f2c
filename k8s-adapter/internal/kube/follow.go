package kube

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/beaconlb/beacon/k8s-adapter/internal/lb"
)

// followAllocations follows the tenant's allocations in the IPAM while this
// replica leads, and queues the Service of every allocation that changed
// behind the adapter's back: released or expired, or moved to other
// addresses (by an operator through beaconctl or the console, or a pool
// deleted with force). Without it such a change would reach the Service only
// at its next event or the periodic resync, and its status would go on
// showing an address the IPAM may give to someone else.
//
// The first stream's snapshot is skipped: the informers and the resync at
// start have queued every Service already. A stream that cannot resume
// where the last one ended (the IPAM compacted past it) queues every
// Service once its snapshot is complete, since changes were missed.
func (c *Controller) followAllocations(ctx context.Context) {
	token, first := "", true
	const minDelay, maxDelay = 100 * time.Millisecond, 30 * time.Second
	delay := minDelay
	for ctx.Err() == nil {
		opened := time.Now()
		next, err := c.lb.Watch(ctx, token, func(ch lb.Change) {
			switch {
			case ch.SnapshotDone:
				if !first {
					c.queueAll()
				}
				first = false
			case ch.Snapshot:
			default:
				c.allocationChanged(ch)
			}
		})
		token = next
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, lb.ErrResumeTooOld) {
			c.logger.WarnContext(ctx, "allocation watch cannot resume; every Service will be reconciled")
			continue
		}
		if time.Since(opened) > time.Minute {
			delay = minDelay // the stream worked for a while: this is a new failure
		}
		c.logger.WarnContext(ctx, "allocation watch ended; reopening", "error", err, "in", delay.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, maxDelay)
	}
}

// allocationChanged queues the Service of an allocation that no longer is
// what the adapter last got from the IPAM for it.
func (c *Controller) allocationChanged(ch lb.Change) {
	if ch.Deleted {
		c.held.Delete(ch.Owner)
		if _, exists, _ := c.services.GetIndexer().GetByKey(ch.Owner); !exists {
			return // the adapter's own release of a deleted Service
		}
	} else if v, ok := c.memos.Load(ch.Owner); ok {
		if m, _ := v.(*memo); m != nil && slices.Equal(m.alloc.GetAddresses(), ch.Addresses) {
			return // what the adapter asked for and published
		}
	}
	// The memo would answer the next pass with the old addresses.
	c.memos.Delete(ch.Owner)
	c.queue.Add(ch.Owner)
}

// queueAll queues every Service in the cache and every owner known to hold
// an allocation.
func (c *Controller) queueAll() {
	for _, key := range c.services.GetIndexer().ListKeys() {
		c.queue.Add(key)
	}
	c.held.Range(func(k, _ any) bool {
		if owner, ok := k.(string); ok {
			c.queue.Add(owner)
		}
		return true
	})
}
