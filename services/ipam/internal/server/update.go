package server

import (
	"context"
	"fmt"
	"slices"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// allocationUpdatable are the allocation fields UpdateAllocation may change.
var allocationUpdatable = []string{"owner_labels", "namespace_labels", "ports", "traffic_policy", "endpoint_nodes", "ttl", "global_role"}

func (a *allocationService) UpdateAllocation(ctx context.Context, req *ipamv1.UpdateAllocationRequest) (*ipamv1.UpdateAllocationResponse, error) {
	const method = "UpdateAllocation"
	var fes ipam.FieldErrors
	in := req.GetAllocation()
	tenant, id := parseAllocationName(&fes, "allocation.name", in.GetName())
	paths := req.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		fes.Add("update_mask", "must name at least one field (or \"*\")")
	}
	for i, p := range paths {
		if p != "*" && !slices.Contains(allocationUpdatable, p) {
			fes.Add(fmt.Sprintf("update_mask.paths[%d]", i), "%q cannot be updated; updatable: %v", p, allocationUpdatable)
		}
	}
	etagRev := parseEtag(&fes, "allocation.etag", in.GetEtag())
	validRequestID(&fes, "request_id", req.GetRequestId())
	// Validate the new values with the same rules as Allocate.
	probe := &ipamv1.Allocation{
		Owner: "x", OwnerLabels: in.GetOwnerLabels(), NamespaceLabels: in.GetNamespaceLabels(),
		Ports: in.GetPorts(), TrafficPolicy: in.GetTrafficPolicy(), EndpointNodes: in.GetEndpointNodes(), Ttl: in.GetTtl(),
		GlobalRole: in.GetGlobalRole(),
	}
	spec := allocationFromProto(&fes, tenant, probe)
	if err := fes.Err(); err != nil {
		return nil, a.fail(ctx, method, err)
	}
	all := slices.Contains(paths, "*")
	set := func(f string) bool { return all || slices.Contains(paths, f) }
	change := func(al *ipam.Allocation) {
		if set("owner_labels") {
			al.OwnerLabels = spec.OwnerLabels
		}
		if set("namespace_labels") {
			al.NamespaceLabels = spec.NamespaceLabels
		}
		if set("ports") {
			al.Ports = spec.Ports
		}
		if set("traffic_policy") {
			al.TrafficPolicy = spec.TrafficPolicy
		}
		if set("endpoint_nodes") {
			al.EndpointNodes = spec.EndpointNodes
		}
		if set("ttl") {
			al.TTL = spec.TTL
		}
		if set("global_role") {
			al.GlobalBackup = spec.GlobalBackup
		}
	}
	res, err := a.s.w.Update(ctx, tenant, id, etagRev, change, meta(ctx, method, req.GetRequestId(), req))
	if err != nil {
		return nil, a.fail(ctx, method, err)
	}
	return &ipamv1.UpdateAllocationResponse{Allocation: allocationToProto(res.Allocation, res.Rev)}, nil
}
