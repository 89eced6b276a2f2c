package replica_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

// TestHoldsExplainThemselves checks what a released owner's hold tells
// others: a request for the held address is refused naming the owner and
// when the hold ends (also in the ErrorInfo's metadata); ListAllocations
// with held lists it; releasing the released owner again ends the hold at
// once (not NOT_FOUND); a refused pool shrink or delete names each address
// and whether it is allocated or held.
func TestHoldsExplainThemselves(t *testing.T) {
	clk := &clock{}
	n := allocsNode(t, replica.Options{Now: clk.now})
	const tenant = "explain"
	parent := "tenants/" + tenant
	mustPool(t, n, "explain", &ipamv1.Pool{Ranges: []string{"198.51.100.200/30"}, Tenants: []string{tenant}})
	mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "ns/old", RequestedAddresses: []string{"198.51.100.201"}})
	mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "ns/live", RequestedAddresses: []string{"198.51.100.202"}})
	rel := mustRelease(t, n, &ipamv1.ReleaseRequest{Parent: parent, Owner: "ns/old", Hold: dur(time.Hour)})
	end := rel.GetHoldExpireTime().AsTime().UTC().Format(time.RFC3339)

	_, err := allocate(ctxT(t), n, tenant, &ipamv1.Allocation{Owner: "ns/new", RequestedAddresses: []string{"198.51.100.201"}})
	wantStatus(t, err, codes.FailedPrecondition, "ns/old", end)
	var info *errdetails.ErrorInfo
	for _, d := range status.Convert(err).Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	diff(t, "error info", map[string]string{"held_for": "ns/old", "hold_expire_time": end}, info.GetMetadata())
	if info.GetReason() != "ADDRESS_IN_USE" {
		t.Errorf("reason %q, want ADDRESS_IN_USE", info.GetReason())
	}

	held, err := n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: parent, Held: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range held.GetAllocations() {
		got = append(got, a.GetOwner()+" "+strings.Join(a.GetAddresses(), ",")+" "+a.GetHoldExpireTime().AsTime().UTC().Format(time.RFC3339))
	}
	diff(t, "held", []string{"ns/old 198.51.100.201 " + end}, got)

	_, err = n.pools.UpdatePool(ctxT(t), &ipamv1.UpdatePoolRequest{
		Pool: &ipamv1.Pool{Name: "pools/explain", Ranges: []string{"198.51.100.200/32"}}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"ranges"}},
	})
	wantStatus(t, err, codes.FailedPrecondition, "198.51.100.201 (held for released ns/old until "+end+")", "198.51.100.202 (allocated to ns/live)")
	_, err = n.pools.DeletePool(ctxT(t), &ipamv1.DeletePoolRequest{Name: "pools/explain"})
	wantStatus(t, err, codes.FailedPrecondition, "198.51.100.201 (held for released ns/old", "198.51.100.202 (allocated to ns/live)")

	// Releasing the released owner ends its hold now.
	again := mustRelease(t, n, &ipamv1.ReleaseRequest{Parent: parent, Owner: "ns/old"})
	diff(t, "ended hold", []string{"198.51.100.201"}, again.GetAddresses())
	diff(t, "the address is free", []string{"198.51.100.201"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "ns/new", RequestedAddresses: []string{"198.51.100.201"}}))
	held, err = n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: parent, Held: true})
	if err != nil || len(held.GetAllocations()) != 0 {
		t.Errorf("holds after ending: %v, %v", held.GetAllocations(), err)
	}
	_, err = n.allocs.Release(ctxT(t), &ipamv1.ReleaseRequest{Parent: parent, Owner: "ns/old"})
	wantStatus(t, err, codes.NotFound)
}
