package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/beaconlb/beacon/k8s-adapter/internal/reason"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// conditionConflict is the IPAM's condition type for another host using an
// allocation's L2 address.
const conditionConflict = "Conflict"

// followConflicts reads the tenant's allocations every ConflictPoll while
// this replica leads and puts a Warning Event (AddressConflict) on the
// Service of each allocation with a Conflict condition not seen at the
// previous read: another host on the segment uses one of its addresses
// (docs/announcement.md, "L2 conflicts"). A conflict that ends and comes
// back is reported again. The conditions are computed by the IPAM from the
// nodes' reports, so the allocation watch does not carry them.
func (c *Controller) followConflicts(ctx context.Context) {
	seen := map[string]bool{}
	t := time.NewTicker(c.cfg.ConflictPoll)
	defer t.Stop()
	for {
		allocs, err := c.lb.List(ctx)
		if err != nil && ctx.Err() == nil {
			c.logger.WarnContext(ctx, "reading allocations for address conflicts failed", "error", err)
		}
		if err == nil {
			seen = c.reportConflicts(allocs, seen)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reportConflicts records a Warning Event for each Conflict condition of
// allocs not in seen, and returns the conditions now present.
func (c *Controller) reportConflicts(allocs []*ipamv1.Allocation, seen map[string]bool) map[string]bool {
	now := map[string]bool{}
	for _, a := range allocs {
		for _, cond := range a.GetConditions() {
			if cond.GetType() != conditionConflict {
				continue
			}
			key := fmt.Sprintf("%s|%s|%s|%s|%s", a.GetOwner(), cond.GetAddress(), cond.GetAnnouncer(), cond.GetInterface(), cond.GetHardwareAddress())
			now[key] = true
			if seen[key] {
				continue
			}
			obj, exists, _ := c.services.GetIndexer().GetByKey(a.GetOwner())
			svc, ok := obj.(*corev1.Service)
			if !exists || !ok {
				continue
			}
			c.recorder.Eventf(svc, corev1.EventTypeWarning, reason.AddressConflict,
				"Another host (MAC %s) uses %s: %s", cond.GetHardwareAddress(), cond.GetAddress(), cond.GetMessage())
		}
	}
	return now
}
