package index

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/assign"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// An address another plan of this replica has reserved is not taken, but
// it is not gone either: that plan may still fail. A plan that finds
// nothing else free, or wants that very address, waits for it instead of
// refusing (the pool is not exhausted, the address not in use) or taking
// an address held for a released owner. Found by the robustness harness:
// two Allocates of one owner on one replica, the first holding the last
// free address in flight, made the second answer POOL_EXHAUSTED although
// the pool never was full.
func TestPlanWaitsForReservedAddresses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, x *Index) // the pool has one free address left after it
		req   func(*ipam.Allocation)
	}{
		{name: "last free address", setup: taken},
		{name: "requested address", setup: taken, req: func(a *ipam.Allocation) {
			a.RequestedAddrs = addrs("192.0.2.1")
		}},
		{name: "held address not reclaimed", setup: func(t *testing.T, x *Index) {
			h := allocate(t, x, "held", func(a *ipam.Allocation) { a.RequestedAddrs = addrs("192.0.2.2") })
			commit(t, x, h, 3)
			rel, err := planRelease(x, "c1", h.Alloc.ID, 0, time.Hour, t0)
			if err != nil {
				t.Fatal(err)
			}
			commit(t, x, rel, 4)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := New()
			x.Apply([]ipam.Event{poolEvent(pool(t, "web", "192.0.2.0-192.0.2.2"), 1)}, 1)
			// .0 (and .2 when held) taken; .1 reserved by a plan in flight.
			commit(t, x, allocate(t, x, "a"), 2)
			tc.setup(t, x)
			first := allocate(t, x, "b", func(a *ipam.Allocation) { a.RequestedAddrs = addrs("192.0.2.1") })
			req := &ipam.Allocation{Tenant: "c1", Owner: "c"}
			if tc.req != nil {
				tc.req(req)
			}
			_, err := planAllocate(x, req, t0)
			var pending *assign.Pending
			if !errors.As(err, &pending) {
				t.Fatalf("plan while the last address is in flight: %v, want Pending", err)
			}
			x.Unreserve(first) // its commit failed
			select {
			case <-pending.Done:
			default:
				t.Fatal("Done not closed when the plan in flight was given up")
			}
			req.RequestedAddrs = nil
			if tc.req != nil {
				tc.req(req)
			}
			got, err := planAllocate(x, req, t0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(addrs("192.0.2.1"), got.Alloc.Addrs, addrCmp); diff != "" {
				t.Errorf("after the plan in flight was given up (-want +got):\n%s", diff)
			}
		})
	}
}

// taken allocates 192.0.2.2.
func taken(t *testing.T, x *Index) {
	commit(t, x, allocate(t, x, "z", func(a *ipam.Allocation) { a.RequestedAddrs = addrs("192.0.2.2") }), 3)
}
