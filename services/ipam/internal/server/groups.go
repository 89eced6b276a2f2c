package server

import (
	"context"
	"fmt"
	"strings"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/index"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// maxGroupTenants bounds a global group's grants.
const maxGroupTenants = 256

type groupService struct {
	ipamv1.UnsafeGlobalGroupServiceServer
	s *Server
}

// parseGroupName returns the "pool/group" key of
// "pools/{pool}/globalGroups/{group}".
func parseGroupName(fes *ipam.FieldErrors, field, name string) string {
	rest, ok := strings.CutPrefix(name, "pools/")
	pool, group, ok2 := strings.Cut(rest, "/globalGroups/")
	if !ok || !ok2 || !validID(pool) || !validID(group) {
		fes.Add(field, "must be pools/{pool}/globalGroups/{group}, where {pool} and {group} %s", idRule)
		return ""
	}
	return pool + "/" + group
}

// groupTenants validates and converts "tenants/{tenant}" grants.
func groupTenants(fes *ipam.FieldErrors, field string, in []string) []string {
	if len(in) > maxGroupTenants {
		fes.Add(field, "at most %d tenants", maxGroupTenants)
		return nil
	}
	out := make([]string, 0, len(in))
	for i, t := range in {
		id := parseParent(fes, fmt.Sprintf("%s[%d]", field, i), t, false)
		if id == "" {
			continue
		}
		for _, o := range out {
			if o == id {
				fes.Add(fmt.Sprintf("%s[%d]", field, i), "repeats %q", t)
			}
		}
		out = append(out, id)
	}
	return out
}

func groupToProto(st index.GroupState) *ipamv1.GlobalGroup {
	g := st.Group
	out := &ipamv1.GlobalGroup{
		Name: ipam.GroupName(g.Key()), Uid: g.UID, Description: g.Description, Addresses: addrsToProto(st.Addrs),
		Etag: etag(st.Rev), CreateTime: ts(g.CreateTime), UpdateTime: ts(g.UpdateTime),
	}
	for _, t := range g.Tenants {
		out.Tenants = append(out.Tenants, "tenants/"+t)
	}
	for _, m := range st.Members {
		role := ipamv1.GlobalRole_GLOBAL_ROLE_ACTIVE
		if m.Backup {
			role = ipamv1.GlobalRole_GLOBAL_ROLE_BACKUP
		}
		out.Members = append(out.Members, &ipamv1.GlobalGroupMember{Allocation: "tenants/" + m.Tenant + "/allocations/" + m.ID, Owner: m.Owner, Role: role})
	}
	return out
}

// withState returns a group as the index knows it now, or alone.
func (g *groupService) withState(grp *ipam.GlobalGroup, rev int64) index.GroupState {
	st, _ := g.s.usage.Group(grp.Key())
	st.Group, st.Rev = grp, rev
	return st
}

func (g *groupService) CreateGlobalGroup(ctx context.Context, req *ipamv1.CreateGlobalGroupRequest) (*ipamv1.CreateGlobalGroupResponse, error) {
	const method = "CreateGlobalGroup"
	var fes ipam.FieldErrors
	pool := parsePoolName(&fes, "parent", req.GetParent())
	if !validID(req.GetGlobalGroupId()) {
		fes.Add("global_group_id", "%s", idRule)
	}
	in := req.GetGlobalGroup()
	if len(in.GetDescription()) > 256 {
		fes.Add("global_group.description", "must be at most 256 bytes")
	}
	tenants := groupTenants(&fes, "global_group.tenants", in.GetTenants())
	validRequestID(&fes, "request_id", req.GetRequestId())
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, g.s.logger, method, err)
	}
	grp := &ipam.GlobalGroup{Pool: pool, ID: req.GetGlobalGroupId(), Description: in.GetDescription(), Tenants: tenants}
	res, err := g.s.w.CreateGroup(ctx, grp, meta(ctx, method, req.GetRequestId(), req))
	if err != nil {
		return nil, toStatus(ctx, g.s.logger, method, err)
	}
	return &ipamv1.CreateGlobalGroupResponse{GlobalGroup: groupToProto(index.GroupState{Group: res.Group, Rev: res.Rev})}, nil
}

func (g *groupService) GetGlobalGroup(ctx context.Context, req *ipamv1.GetGlobalGroupRequest) (*ipamv1.GetGlobalGroupResponse, error) {
	const method = "GetGlobalGroup"
	var fes ipam.FieldErrors
	key := parseGroupName(&fes, "name", req.GetName())
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, g.s.logger, method, err)
	}
	st, err := g.s.w.Group(ctx, key)
	if err != nil {
		return nil, toStatus(ctx, g.s.logger, method, err)
	}
	return &ipamv1.GetGlobalGroupResponse{GlobalGroup: groupToProto(st)}, nil
}

func (g *groupService) ListGlobalGroups(ctx context.Context, req *ipamv1.ListGlobalGroupsRequest) (*ipamv1.ListGlobalGroupsResponse, error) {
	const method = "ListGlobalGroups"
	var fes ipam.FieldErrors
	prefix := ""
	if req.GetParent() != "pools/-" {
		prefix = parsePoolName(&fes, "parent", req.GetParent()) + "/"
	}
	size := pageSize(&fes, "page_size", req.GetPageSize())
	q := queryHash("globalGroups", prefix)
	after := g.s.pages.decode(&fes, "page_token", req.GetPageToken(), q)
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, g.s.logger, method, err)
	}
	page, err := g.s.r.List(ctx, ipam.KindGlobalGroup, prefix, after, size, 0)
	if err != nil {
		return nil, toStatus(ctx, g.s.logger, method, err)
	}
	resp := &ipamv1.ListGlobalGroupsResponse{}
	for _, ev := range page.Items {
		resp.GlobalGroups = append(resp.GlobalGroups, groupToProto(g.withState(ev.Value.(*ipam.GlobalGroup), ev.Rev)))
	}
	if page.More && len(page.Items) > 0 {
		resp.NextPageToken = g.s.pages.encode(page.Items[len(page.Items)-1].Ref.ID, q)
	}
	return resp, nil
}

// groupUpdatable are the fields UpdateGlobalGroup may change.
var groupUpdatable = []string{"description", "tenants"}

func (g *groupService) UpdateGlobalGroup(ctx context.Context, req *ipamv1.UpdateGlobalGroupRequest) (*ipamv1.UpdateGlobalGroupResponse, error) {
	const method = "UpdateGlobalGroup"
	var fes ipam.FieldErrors
	in := req.GetGlobalGroup()
	key := parseGroupName(&fes, "global_group.name", in.GetName())
	etagRev := parseEtag(&fes, "global_group.etag", in.GetEtag())
	validRequestID(&fes, "request_id", req.GetRequestId())
	merged := applyMask(&fes, &ipamv1.GlobalGroup{}, in, req.GetUpdateMask().GetPaths(), groupUpdatable)
	if len(merged.GetDescription()) > 256 {
		fes.Add("global_group.description", "must be at most 256 bytes")
	}
	tenants := groupTenants(&fes, "global_group.tenants", merged.GetTenants())
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, g.s.logger, method, err)
	}
	set := func(f string) bool {
		for _, p := range req.GetUpdateMask().GetPaths() {
			if p == f || p == "*" {
				return true
			}
		}
		return false
	}
	next := func(grp *ipam.GlobalGroup) {
		if set("description") {
			grp.Description = merged.GetDescription()
		}
		if set("tenants") {
			grp.Tenants = tenants
		}
	}
	res, err := g.s.w.UpdateGroup(ctx, key, etagRev, next, meta(ctx, method, req.GetRequestId(), req))
	if err != nil {
		return nil, toStatus(ctx, g.s.logger, method, err)
	}
	return &ipamv1.UpdateGlobalGroupResponse{GlobalGroup: groupToProto(g.withState(res.Group, res.Rev))}, nil
}

func (g *groupService) DeleteGlobalGroup(ctx context.Context, req *ipamv1.DeleteGlobalGroupRequest) (*ipamv1.DeleteGlobalGroupResponse, error) {
	const method = "DeleteGlobalGroup"
	var fes ipam.FieldErrors
	key := parseGroupName(&fes, "name", req.GetName())
	etagRev := parseEtag(&fes, "etag", req.GetEtag())
	validRequestID(&fes, "request_id", req.GetRequestId())
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, g.s.logger, method, err)
	}
	if err := g.s.w.DeleteGroup(ctx, key, etagRev, meta(ctx, method, req.GetRequestId(), req)); err != nil {
		return nil, toStatus(ctx, g.s.logger, method, err)
	}
	return &ipamv1.DeleteGlobalGroupResponse{}, nil
}
