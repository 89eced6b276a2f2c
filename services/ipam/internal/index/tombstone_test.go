package index

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// A claim deleted, its tombstone pruned once the watch passed the delete,
// then replayed at an older revision (the answer of a read made before the
// delete, such as a conflict's, arriving after the watch delivered it) must
// stay deleted: the pool must not look full when it is not.
func TestDeletedClaimStaysDeletedAfterPruneAndReplay(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.0")
	claim := ipam.Event{Ref: ClaimRef(addr), Value: &ipam.Claim{Addr: addr, Pool: "web", Tenant: "c1"}, Rev: 2}
	for _, tc := range []struct {
		name   string
		replay func(x *Index)
	}{
		{"out of band, as a conflict read", func(x *Index) { x.Apply([]ipam.Event{claim}, 0) }},
		{"as a commit applied late", func(x *Index) {
			x.Committed(&Plan{Change: ipam.Change{Puts: []ipam.Put{{Ref: claim.Ref, Value: claim.Value}}}}, claim.Rev)
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
			if p := plan(t, x, "one"); !slices.Equal(p.Alloc.Addrs, []netip.Addr{addr}) {
				t.Errorf("planned %v, want the deleted claim's %s", p.Alloc.Addrs, addr)
			}
		})
	}
}
