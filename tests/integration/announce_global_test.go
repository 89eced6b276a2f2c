package integration

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/netlab"
	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// One address for a Service in two clusters (MetalLB #2136, #148): two
// tenants, each with its own announcer, join one global group and peer with
// one FRR. FRR holds two paths (ECMP across the clusters); the endpoints of
// one cluster vanish → its path goes, the other stays; of both → the route
// is withdrawn; endpoints back → both paths again. A backup member's path
// comes with half the local preference and MED 1000 (iBGP), so FRR prefers
// the active one.
func TestGlobalAddressAcrossClusters(t *testing.T) {
	requireLab(t, netlab.FRRBgpd, "vtysh")
	c := newCluster(t, e2e.Options{Nodes: 2, TenantOf: e2e.GlobalTenantOf})
	ctx := context.Background()
	frr, err := c.StartFRR(ctx, e2e.NodeASN, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.SetupGlobal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	east, west := e2e.GlobalTenants[0], e2e.GlobalTenants[1]
	both := c.NodeAddrsOf(east, west)
	t.Logf("global address %v announced by %v", p, both)
	step := func(what string, want ...netip.Addr) {
		t.Helper()
		if err := e2e.WaitNextHops(ctx, frr, p, 30*time.Second, want...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	step("both clusters announce", both...)
	must(t, c.SetEndpoints(ctx, east, e2e.GlobalOwner, false))
	step("east has no endpoints", c.NodeAddrsOf(west)...)
	must(t, c.SetEndpoints(ctx, west, e2e.GlobalOwner, false))
	step("neither has endpoints: withdrawn")
	must(t, c.SetEndpoints(ctx, east, e2e.GlobalOwner, true))
	must(t, c.SetEndpoints(ctx, west, e2e.GlobalOwner, true))
	step("endpoints back", both...)

	// West becomes the standby.
	name := "tenants/" + west + "/allocations/" + e2e.AllocationID(e2e.GlobalOwner)
	if _, err := c.Allocations.UpdateAllocation(ctx, &ipamv1.UpdateAllocationRequest{
		Allocation: &ipamv1.Allocation{Name: name, GlobalRole: ipamv1.GlobalRole_GLOBAL_ROLE_BACKUP},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"global_role"}},
	}); err != nil {
		t.Fatal(err)
	}
	var want []path
	for _, a := range c.NodeAddrsOf(east) {
		want = append(want, path{NextHop: a, LocalPref: 100})
	}
	for _, a := range c.NodeAddrsOf(west) {
		want = append(want, path{NextHop: a, LocalPref: 50})
	}
	if err := waitPaths(ctx, frr, p, want, true); err != nil {
		t.Fatalf("backup member: %v", err)
	}

	// The last member leaving frees the address: FRR loses the route.
	for _, tn := range []string{east, west} {
		must(t, c.Release(ctx, "tenants/"+tn+"/allocations/"+e2e.AllocationID(e2e.GlobalOwner)))
	}
	if err := netlab.WaitNoPath(ctx, frr, p, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}
