package index

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/assign"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// A claim deleted, its tombstone pruned once the watch passed the delete,
// then replayed at an older revision (the answer of a read made before the
// delete, such as a conflict's, arriving after the watch delivered it) must
// stay deleted: the pool must not look full when it is not.
func TestDeletedClaimStaysDeletedAfterPruneAndReplay(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.0")
	claim := ipam.Event{Ref: ipam.ClaimRef(addr), Value: &ipam.Claim{Addr: addr, Pool: "web", Tenant: "c1"}, Rev: 2}
	for _, tc := range []struct {
		name   string
		replay func(x *Index)
	}{
		{"out of band, as a conflict read", func(x *Index) { x.Apply([]ipam.Event{claim}, 0) }},
		{"as a commit applied late", func(x *Index) {
			x.Committed(&Reservation{Decision: &assign.Decision{Change: ipam.Change{Puts: []ipam.Put{{Ref: claim.Ref, Value: claim.Value}}}}}, claim.Rev)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := New()
			x.Apply([]ipam.Event{poolEvent(pool(t, "web", "192.0.2.0/31"), 1), claim}, 2)
			x.Apply([]ipam.Event{{Ref: claim.Ref, Rev: 3}}, 3) // deleted; the watch is past it
			x.Apply(nil, 5)                                    // progress: tombstones up to 5 pruned
			tc.replay(x)
			if got := x.ClaimsInPool("web"); len(got) != 0 {
				t.Errorf("claims after the replay: %v, want none", got)
			}
			var used []string
			for _, u := range x.Usage("web") {
				used = append(used, fmt.Sprintf("%s used=%d free=%s", u.Family, u.Used, u.Free))
			}
			if diff := cmp.Diff([]string{"IPv4 used=0 free=2"}, used); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			if p := allocate(t, x, "one"); !slices.Equal(p.Alloc.Addrs, []netip.Addr{addr}) {
				t.Errorf("planned %v, want the deleted claim's %s", p.Alloc.Addrs, addr)
			}
		})
	}
}

// A held address taken back by its owner is no longer reclaimable: the
// pool's set of held addresses follows its claims.
func TestHeldSetFollowsClaims(t *testing.T) {
	x := New()
	x.Apply([]ipam.Event{poolEvent(pool(t, "web", "192.0.2.0/31"), 1)}, 1)
	a := allocate(t, x, "a")
	commit(t, x, a, 2)
	commit(t, x, allocate(t, x, "b"), 3)
	rel, err := planRelease(x, "c1", a.Alloc.ID, 0, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, x, rel, 4)
	back := allocate(t, x, "a")
	if !slices.Equal(back.Alloc.Addrs, a.Alloc.Addrs) {
		t.Fatalf("owner got %v back, want %v", back.Alloc.Addrs, a.Alloc.Addrs)
	}
	commit(t, x, back, 5)
	if _, err := planAllocate(x, &ipam.Allocation{Tenant: "c1", Owner: "c"}, t0); !errors.Is(err, ipam.ErrPoolExhausted) {
		t.Fatalf("plan in a full pool with nothing held = %v, want ErrPoolExhausted", err)
	}
}
