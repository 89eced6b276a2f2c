package replica_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

// An allocation with address_count N gets the N lowest free addresses of
// each family from one pool, keeps them through a release with a hold and
// a return, renews like any, and frees them all; another owner's hold is
// reclaimed N addresses at a time when the pool has nothing else.
func TestAllocateSeveralAddresses(t *testing.T) {
	n := startNode(t, sharedEtcd(t, "multiaddr").client, replica.Options{})
	const tenant = "multi"
	mustPool(t, n, "multi", &ipamv1.Pool{Ranges: []string{"198.51.100.16/29", "2001:db8:5::/125"}, Tenants: []string{tenant}})
	dual := func(owner string, count int32) *ipamv1.Allocation {
		return &ipamv1.Allocation{Owner: owner, AddressCount: count, IpFamilyPolicy: ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_REQUIRE_DUAL_STACK,
			IpFamilies: []ipamv1.IPFamily{ipamv1.IPFamily_IP_FAMILY_IPV4, ipamv1.IPFamily_IP_FAMILY_IPV6}}
	}
	v4 := func(owner string, count int32) *ipamv1.Allocation {
		return &ipamv1.Allocation{Owner: owner, AddressCount: count, IpFamilies: []ipamv1.IPFamily{ipamv1.IPFamily_IP_FAMILY_IPV4}}
	}
	first := mustAllocate(t, n, tenant, dual("web", 3))
	want := []string{"198.51.100.16", "198.51.100.17", "198.51.100.18", "2001:db8:5::", "2001:db8:5::1", "2001:db8:5::2"}
	diff(t, "three per family", want, first.GetAddresses())
	diff(t, "address_count shown", int32(3), first.GetAddressCount())

	// The same request again is the same allocation; another count is not.
	diff(t, "again", want, mustAllocate(t, n, tenant, dual("web", 3)).GetAddresses())
	_, err := allocate(ctxT(t), n, tenant, dual("web", 2))
	wantCode(t, err, codes.FailedPrecondition)

	// An IPv4-only owner with one address takes the next one.
	diff(t, "single", []string{"198.51.100.19"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "one"}))

	// Renew.
	ttl := mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "ttl", AddressCount: 2, Ttl: dur(time.Minute)})
	diff(t, "ttl addresses", []string{"198.51.100.20", "198.51.100.21"}, ttl.GetAddresses())
	if _, err := n.allocs.RenewAllocation(ctxT(t), &ipamv1.RenewAllocationRequest{Name: ttl.GetName()}); err != nil {
		t.Fatalf("renew: %v", err)
	}

	// Released with a hold, the owner gets all of them back.
	rel := mustRelease(t, n, &ipamv1.ReleaseRequest{Parent: "tenants/" + tenant, Owner: "web", Hold: dur(time.Hour)})
	diff(t, "released", want, rel.GetAddresses())
	diff(t, "back from the hold", want, mustAllocate(t, n, tenant, dual("web", 3)).GetAddresses())

	// Two IPv4 addresses are left (.22, .23): a count of 3 does not fit.
	_, err = allocate(ctxT(t), n, tenant, v4("big", 3))
	wantCode(t, err, codes.ResourceExhausted)

	// With the pool full, a hold of 3 IPv4 addresses is reclaimed whole.
	diff(t, "fill", []string{"198.51.100.22", "198.51.100.23"}, addrsOf(t, n, tenant, v4("fill", 2)))
	mustRelease(t, n, &ipamv1.ReleaseRequest{Parent: "tenants/" + tenant, Owner: "web", Hold: dur(time.Hour)})
	diff(t, "reclaimed", []string{"198.51.100.16", "198.51.100.17"}, addrsOf(t, n, tenant, v4("late", 2)))

	// Released for good, they are free again.
	releaseOwner(t, n, tenant, "late")
	diff(t, "freed", []string{"198.51.100.16", "198.51.100.17"}, addrsOf(t, n, tenant, v4("later", 2)))
}
