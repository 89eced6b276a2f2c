package index

import (
	"container/heap"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// expiryItem is a time at which an allocation or hold may run out. Items are
// not removed when their object changes: Due checks them against the index.
type expiryItem struct {
	at  time.Time
	ref ipam.Ref
	rev int64
}

type expiryHeap []expiryItem

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(v any)        { *h = append(*h, v.(expiryItem)) }
func (h *expiryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

func (x *Index) pushExpiry(at time.Time, ref ipam.Ref, rev int64) {
	earliest := len(x.expiry) == 0 || at.Before(x.expiry[0].at)
	heap.Push(&x.expiry, expiryItem{at: at, ref: ref, rev: rev})
	if earliest {
		select {
		case x.wake <- struct{}{}:
		default:
		}
	}
}

// Wake is signalled when an expiry earlier than all others is added.
func (x *Index) Wake() <-chan struct{} { return x.wake }

// Due returns the refs whose expiry is at or before now and that still hold
// the revision the expiry was recorded for, and the next expiry after now
// (zero if none).
func (x *Index) Due(now time.Time) ([]ipam.Ref, time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var due []ipam.Ref
	for len(x.expiry) > 0 && !x.expiry[0].at.After(now) {
		it := heap.Pop(&x.expiry).(expiryItem)
		if x.liveRev(it.ref) == it.rev {
			due = append(due, it.ref)
		}
	}
	if len(x.expiry) == 0 {
		return due, time.Time{}
	}
	return due, x.expiry[0].at
}

// Requeue puts back a due ref that could not be freed yet (a conflict or an
// etcd error), to be tried again at retry.
func (x *Index) Requeue(ref ipam.Ref, retry time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if rev := x.liveRev(ref); rev > 0 {
		x.pushExpiry(retry, ref, rev)
	}
}
