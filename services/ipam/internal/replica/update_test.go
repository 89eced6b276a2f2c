package replica_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

func TestUpdateAllocation(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	mustPool(t, n, "upd", &ipamv1.Pool{Ranges: []string{"203.0.113.0/29"}})
	web := mustAllocate(t, n, "c1", &ipamv1.Allocation{Owner: "ns/web", SharingKey: "k", Ports: []*ipamv1.Port{{Port: 80}}})
	dns := mustAllocate(t, n, "c1", &ipamv1.Allocation{Owner: "ns/dns", SharingKey: "k", Ports: []*ipamv1.Port{{Port: 53}}})
	if web.GetAddresses()[0] != dns.GetAddresses()[0] {
		t.Fatalf("sharers got different addresses: %v %v", web.GetAddresses(), dns.GetAddresses())
	}

	resp, err := n.allocs.UpdateAllocation(ctxT(t), &ipamv1.UpdateAllocationRequest{
		Allocation: &ipamv1.Allocation{
			Name: web.GetName(), Etag: web.GetEtag(),
			EndpointNodes: []string{"node-a", "node-b"}, TrafficPolicy: ipamv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL,
			OwnerLabels: map[string]string{"app": "web"},
		},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"endpoint_nodes", "traffic_policy", "owner_labels"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.GetAllocation()
	if diff := cmp.Diff([]string{"node-a", "node-b"}, got.GetEndpointNodes()); diff != "" {
		t.Errorf("endpoint nodes: %s", diff)
	}
	if got.GetTrafficPolicy() != ipamv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL || got.GetOwnerLabels()["app"] != "web" {
		t.Errorf("update not applied: %v", got)
	}
	if diff := cmp.Diff(web.GetAddresses(), got.GetAddresses()); diff != "" {
		t.Errorf("update moved the addresses: %s", diff)
	}
	// A stale etag is refused.
	_, err = n.allocs.UpdateAllocation(ctxT(t), &ipamv1.UpdateAllocationRequest{
		Allocation: &ipamv1.Allocation{Name: web.GetName(), Etag: web.GetEtag()},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"endpoint_nodes"}},
	})
	wantCode(t, err, codes.Aborted)
	// New ports that clash with a sharer are refused.
	_, err = n.allocs.UpdateAllocation(ctxT(t), &ipamv1.UpdateAllocationRequest{
		Allocation: &ipamv1.Allocation{Name: web.GetName(), Ports: []*ipamv1.Port{{Port: 53}}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"ports"}},
	})
	wantCode(t, err, codes.FailedPrecondition)
	// Addresses cannot be updated.
	_, err = n.allocs.UpdateAllocation(ctxT(t), &ipamv1.UpdateAllocationRequest{
		Allocation: &ipamv1.Allocation{Name: web.GetName()},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"addresses"}},
	})
	wantCode(t, err, codes.InvalidArgument)
}

// An update too large for one etcd transaction fails alone and says so;
// the allocation is left as it was.
func TestUpdateAllocationTooLarge(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	mustPool(t, n, "big", &ipamv1.Pool{Ranges: []string{"203.0.113.8/29"}})
	web := mustAllocate(t, n, "c1", &ipamv1.Allocation{Owner: "ns/web"})
	nodes := make([]string, 8000)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("%0200d", i)
	}
	_, err := n.allocs.UpdateAllocation(ctxT(t), &ipamv1.UpdateAllocationRequest{
		Allocation: &ipamv1.Allocation{Name: web.GetName(), EndpointNodes: nodes},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"endpoint_nodes"}},
	})
	wantStatus(t, err, codes.InvalidArgument, "KiB")
	if got := reason(err); got != "REQUEST_TOO_LARGE" {
		t.Errorf("reason %q, want REQUEST_TOO_LARGE", got)
	}
	got, err := n.allocs.GetAllocation(ctxT(t), &ipamv1.GetAllocationRequest{Name: web.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetAllocation().GetEtag() != web.GetEtag() {
		t.Errorf("etag %s after the refused update, want %s", got.GetAllocation().GetEtag(), web.GetEtag())
	}
}
