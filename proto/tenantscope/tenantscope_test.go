package tenantscope_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/proto/tenantscope"
)

func TestCheckRequest(t *testing.T) {
	tests := []struct {
		name  string
		req   proto.Message
		first bool
		want  string
	}{
		{"own parent", &ipamv1.ListAllocationsRequest{Parent: "tenants/c1"}, true, ok},
		{"other parent", &ipamv1.ListAllocationsRequest{Parent: "tenants/c2"}, true, refused},
		{"every tenant", &ipamv1.ListAllocationsRequest{Parent: "tenants/-"}, true, refused},
		{"prefix of another tenant", &ipamv1.ListAllocationsRequest{Parent: "tenants/c10"}, true, refused},
		{"no parent", &ipamv1.ListAllocationsRequest{}, true, refused},
		{"bare tenant ID", &ipamv1.ListAllocationsRequest{Parent: "c1"}, true, refused},
		{"own name", &ipamv1.GetAllocationRequest{Name: "tenants/c1/allocations/a0123456789abcdef0123"}, true, ok},
		{"other name", &ipamv1.GetAllocationRequest{Name: "tenants/c2/allocations/a0123456789abcdef0123"}, true, refused},
		{"pool name where a tenant's is wanted", &ipamv1.GetAllocationRequest{Name: "pools/p"}, true, refused},
		{"release by own parent and owner", &ipamv1.ReleaseRequest{Parent: "tenants/c1", Owner: "ns/svc"}, true, ok},
		{"release by other parent", &ipamv1.ReleaseRequest{Parent: "tenants/c2", Owner: "ns/svc"}, true, refused},
		{"release naming both", &ipamv1.ReleaseRequest{Name: "tenants/c1/allocations/a0123456789abcdef0123", Parent: "tenants/c2"}, true, refused},
		{"update own (nested name)", &ipamv1.UpdateAllocationRequest{
			Allocation: &ipamv1.Allocation{Name: "tenants/c1/allocations/a0123456789abcdef0123"},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"owner_labels"}},
		}, true, ok},
		{"update other (nested name)", &ipamv1.UpdateAllocationRequest{Allocation: &ipamv1.Allocation{Name: "tenants/c2/allocations/a0123456789abcdef0123"}}, true, refused},
		{"update without a name", &ipamv1.UpdateAllocationRequest{Allocation: &ipamv1.Allocation{Owner: "x"}}, true, refused},
		{"allocate with another tenant's name in the body", &ipamv1.AllocateRequest{Parent: "tenants/c1", Allocation: &ipamv1.Allocation{Name: "tenants/c2/allocations/a0123456789abcdef0123"}}, true, refused},
		{"subscribe hello own", &ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Hello{Hello: &ipamv1.SubscribeHello{
			Parent: "tenants/c1", Node: "n1", Interfaces: []*ipamv1.NetworkInterface{{Name: "eth0"}},
		}}}, true, ok},
		{"subscribe hello other", &ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Hello{Hello: &ipamv1.SubscribeHello{Parent: "tenants/c2", Node: "n1"}}}, true, refused},
		{"subscribe opening with a heartbeat", &ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Heartbeat{Heartbeat: &ipamv1.Heartbeat{}}}, true, refused},
		{"subscribe heartbeat later", &ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Heartbeat{Heartbeat: &ipamv1.Heartbeat{}}}, false, ok},
		{"subscribe second hello other", &ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Hello{Hello: &ipamv1.SubscribeHello{Parent: "tenants/c2"}}}, false, refused},
		{"interface names are not resource names", &ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Interfaces{Interfaces: &ipamv1.InterfacesUpdate{
			Interfaces: []*ipamv1.NetworkInterface{{Name: "eth0"}, {Name: "bond0.100"}},
		}}}, false, ok},
		{"community alias names are not resource names", &ipamv1.CreateCommunityRequest{Parent: "tenants/c1", Community: &ipamv1.Community{
			Aliases: []*ipamv1.CommunityAlias{{Name: "no-export", Value: "65535:65281"}},
		}}, true, ok},
		{"a nested slashed name of another tenant", &ipamv1.CreateCommunityRequest{Parent: "tenants/c1", Community: &ipamv1.Community{
			Aliases: []*ipamv1.CommunityAlias{{Name: "tenants/c2/x"}},
		}}, true, refused},
		{"own tenant", &ipamv1.GetTenantRequest{Name: "tenants/c1"}, true, ok},
		{"other tenant", &ipamv1.GetTenantRequest{Name: "tenants/c2"}, true, refused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tenantscope.CheckRequest(tt.req.ProtoReflect(), "c1", tt.first)
			if got := kind(err); got != tt.want {
				t.Errorf("CheckRequest = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestCheckRequestUnknownFields refuses requests carrying fields the
// gateway cannot see into: they could hide a resource name.
func TestCheckRequestUnknownFields(t *testing.T) {
	own := &ipamv1.ListAllocationsRequest{Parent: "tenants/c1"}
	b, err := proto.Marshal(own)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, 0xa2, 0x06, 0x0a) // field 100, length-delimited, 10 bytes
	b = append(b, []byte("tenants/c2")...)
	var got ipamv1.ListAllocationsRequest
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if err := tenantscope.CheckRequest(got.ProtoReflect(), "c1", true); kind(err) != unknownFields {
		t.Fatalf("CheckRequest with an unknown field = %v, want InvalidArgument", err)
	}
}

func TestCheckResponse(t *testing.T) {
	ok := &ipamv1.ListAllocationsResponse{Allocations: []*ipamv1.Allocation{
		{Name: "tenants/c1/allocations/a1", Pool: "pools/p", Announcements: []*ipamv1.AllocationAnnouncement{{Announcer: "tenants/c1/announcers/n1"}}},
	}}
	if err := tenantscope.CheckResponse(ok.ProtoReflect(), "c1"); err != nil {
		t.Errorf("own response refused: %v", err)
	}
	leak := &ipamv1.ListAllocationsResponse{Allocations: []*ipamv1.Allocation{{Name: "tenants/c1/allocations/a1"}, {Name: "tenants/c2/allocations/a2"}}}
	if err := tenantscope.CheckResponse(leak.ProtoReflect(), "c1"); kind(err) != leaked {
		t.Errorf("response with another tenant's allocation = %v, want Internal", err)
	}
	watch := &ipamv1.WatchAllocationsResponse{Events: []*ipamv1.AllocationEvent{{Allocation: &ipamv1.Allocation{Name: "tenants/c2/allocations/a2"}}}}
	if err := tenantscope.CheckResponse(watch.ProtoReflect(), "c1"); kind(err) != leaked {
		t.Errorf("watch event of another tenant = %v, want Internal", err)
	}
}

func TestNarrowPoolRequest(t *testing.T) {
	tests := []struct{ filter, want string }{
		{"", `tenant = "c1"`},
		{`labels.zone = "a"`, `labels.zone = "a" AND tenant = "c1"`},
		{`  tenant = "c2" `, `tenant = "c2" AND tenant = "c1"`},
	}
	for _, tt := range tests {
		req := &ipamv1.ListPoolsRequest{Filter: tt.filter, PageSize: 5}
		if !tenantscope.NarrowPoolRequest(req.ProtoReflect(), "c1") {
			t.Errorf("%q: not narrowed", tt.filter)
		}
		if diff := cmp.Diff(&ipamv1.ListPoolsRequest{Filter: tt.want, PageSize: 5}, req, protocmp.Transform()); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.filter, diff)
		}
	}
	if tenantscope.NarrowPoolRequest((&ipamv1.GetPoolRequest{Name: "pools/p"}).ProtoReflect(), "c1") {
		t.Error("GetPoolRequest has no filter, yet was narrowed")
	}
}

func TestFilterPoolResponse(t *testing.T) {
	list := &ipamv1.ListPoolsResponse{Pools: []*ipamv1.Pool{
		{Name: "pools/everyone"},
		{Name: "pools/mine", Tenants: []string{"c1"}},
		{Name: "pools/shared", Tenants: []string{"c2", "c1", "c3"}},
		{Name: "pools/theirs", Tenants: []string{"c2"}},
	}, NextPageToken: "next"}
	changed, err := tenantscope.FilterPoolResponse(list.ProtoReflect(), "c1")
	if err != nil || !changed {
		t.Fatalf("FilterPoolResponse = %v, %v", changed, err)
	}
	want := &ipamv1.ListPoolsResponse{Pools: []*ipamv1.Pool{
		{Name: "pools/everyone"},
		{Name: "pools/mine", Tenants: []string{"c1"}},
		{Name: "pools/shared", Tenants: []string{"c1"}}, // other tenants' names withheld
	}, NextPageToken: "next"}
	if diff := cmp.Diff(want, list, protocmp.Transform()); diff != "" {
		t.Errorf("filtered list (-want +got):\n%s", diff)
	}

	get := &ipamv1.GetPoolResponse{Pool: &ipamv1.Pool{Name: "pools/theirs", Tenants: []string{"c2"}}}
	if _, err := tenantscope.FilterPoolResponse(get.ProtoReflect(), "c1"); kind(err) != refused {
		t.Errorf("GetPool of another tenant's pool = %v, want PermissionDenied", err)
	}
	get = &ipamv1.GetPoolResponse{Pool: &ipamv1.Pool{Name: "pools/everyone"}}
	if changed, err := tenantscope.FilterPoolResponse(get.ProtoReflect(), "c1"); err != nil || changed {
		t.Errorf("GetPool of a pool for everyone = %v, %v; want unchanged", changed, err)
	}
}

// The kinds of result of the checks.
const (
	ok            = "ok"
	refused       = "refused"
	unknownFields = "unknown fields"
	leaked        = "leak"
)

// kind names what a check returned.
func kind(err error) string {
	var r *tenantscope.Refusal
	var l *tenantscope.LeakError
	switch {
	case err == nil:
		return ok
	case errors.As(err, &r):
		return refused
	case errors.Is(err, tenantscope.ErrUnknownFields):
		return unknownFields
	case errors.As(err, &l):
		return leaked
	}
	return "unexpected: " + err.Error()
}
