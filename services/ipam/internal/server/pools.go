package server

import (
	"context"
	"errors"
	"fmt"
	"slices"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/filter"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

type poolService struct {
	ipamv1.UnsafePoolServiceServer
	s *Server
}

func (p *poolService) fail(ctx context.Context, method string, err error) error {
	return toStatus(ctx, p.s.logger, method, err)
}

func (p *poolService) render(pool *ipam.Pool, rev int64) *ipamv1.Pool {
	return poolToProto(pool, rev, p.s.usage.Usage(pool.Name))
}

func (p *poolService) CreatePool(ctx context.Context, req *ipamv1.CreatePoolRequest) (*ipamv1.CreatePoolResponse, error) {
	const method = "CreatePool"
	var fes ipam.FieldErrors
	if !validID(req.GetPoolId()) {
		fes.Add("pool_id", "%s", idRule)
	}
	pool := poolFromProto(&fes, "pool", req.GetPoolId(), req.GetPool())
	validRequestID(&fes, "request_id", req.GetRequestId())
	if err := fes.Err(); err != nil {
		return nil, p.fail(ctx, method, err)
	}
	res, err := p.s.w.CreatePool(ctx, pool, req.GetValidateOnly(), meta(ctx, method, req.GetRequestId(), req))
	if err != nil {
		return nil, p.fail(ctx, method, err)
	}
	return &ipamv1.CreatePoolResponse{Pool: p.render(res.Pool, res.Rev)}, nil
}

func (p *poolService) GetPool(ctx context.Context, req *ipamv1.GetPoolRequest) (*ipamv1.GetPoolResponse, error) {
	const method = "GetPool"
	var fes ipam.FieldErrors
	id := parsePoolName(&fes, "name", req.GetName())
	if err := fes.Err(); err != nil {
		return nil, p.fail(ctx, method, err)
	}
	res, err := p.s.w.GetPool(ctx, id)
	if err != nil {
		return nil, p.fail(ctx, method, err)
	}
	return &ipamv1.GetPoolResponse{Pool: p.render(res.Pool, res.Rev)}, nil
}

func (p *poolService) ListPools(ctx context.Context, req *ipamv1.ListPoolsRequest) (*ipamv1.ListPoolsResponse, error) {
	const method = "ListPools"
	var fes ipam.FieldErrors
	size := pageSize(&fes, "page_size", req.GetPageSize())
	f, err := filter.Parse(req.GetFilter(), "labels", "tenant")
	if err != nil {
		fes.Add("filter", "%s", err.Error())
	}
	// A tenant term asks whether the tenant may draw from the pool, which
	// is no field of the pool: take those terms out and check them apart.
	var tenants []filter.Term
	f.Terms = slices.DeleteFunc(f.Terms, func(t filter.Term) bool {
		if t.Field != "tenant" {
			return false
		}
		if t.Op != filter.Equal && t.Op != filter.NotEqual {
			fes.Add("filter", "tenant takes only = and !=")
		}
		tenants = append(tenants, t)
		return true
	})
	q := queryHash("pools", req.GetFilter())
	after := p.s.pages.decode(&fes, "page_token", req.GetPageToken(), q)
	if err := fes.Err(); err != nil {
		return nil, p.fail(ctx, method, err)
	}
	resp := &ipamv1.ListPoolsResponse{}
	var rev int64
	for {
		page, err := p.s.r.List(ctx, ipam.KindPool, "", after, max(size, 100), rev)
		if err != nil {
			return nil, p.fail(ctx, method, err)
		}
		rev = page.Revision
		for _, ev := range page.Items {
			pool := ev.Value.(*ipam.Pool)
			after = ev.Ref.ID
			if !allowsTenants(pool, tenants) || !f.Match(nil, selector.SetOf(pool.Labels)) {
				continue
			}
			resp.Pools = append(resp.Pools, p.render(pool, ev.Rev))
			if len(resp.Pools) == size {
				if page.More || ev.Ref != page.Items[len(page.Items)-1].Ref {
					resp.NextPageToken = p.s.pages.encode(after, q)
				}
				return resp, nil
			}
		}
		if !page.More {
			return resp, nil
		}
	}
}

// allowsTenants reports whether every tenant term holds for a pool:
// tenant = "T" when T may draw from it, tenant != "T" when T may not.
func allowsTenants(p *ipam.Pool, terms []filter.Term) bool {
	for _, t := range terms {
		if p.AllowsTenant(t.Value) != (t.Op == filter.Equal) {
			return false
		}
	}
	return true
}

// updatable are the pool fields UpdatePool may change.
var updatable = []string{"description", "ranges", "exclusions", "auto_assign", "avoid_buggy_ips", "tenants", "allocation_policy", "labels"}

func (p *poolService) UpdatePool(ctx context.Context, req *ipamv1.UpdatePoolRequest) (*ipamv1.UpdatePoolResponse, error) {
	const method = "UpdatePool"
	var fes ipam.FieldErrors
	id := parsePoolName(&fes, "pool.name", req.GetPool().GetName())
	paths := req.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		fes.Add("update_mask", "must name at least one field (or \"*\")")
	}
	for i, path := range paths {
		if path != "*" && !slices.Contains(updatable, path) {
			fes.Add(fmt.Sprintf("update_mask.paths[%d]", i), "%q cannot be updated; updatable: %v", path, updatable)
		}
	}
	etagRev := parseEtag(&fes, "pool.etag", req.GetPool().GetEtag())
	validRequestID(&fes, "request_id", req.GetRequestId())
	if err := fes.Err(); err != nil {
		return nil, p.fail(ctx, method, err)
	}
	cur, err := p.s.w.GetPool(ctx, id)
	if errors.Is(err, ipam.ErrNotFound) && req.GetRequestId() != "" {
		// A retry of an update whose pool was deleted since gets the
		// first answer: UpdatePool looks its request_id up before it reads
		// the pool (and fails NOT_FOUND if it is new).
		res, err := p.s.w.UpdatePool(ctx, &ipam.Pool{Name: id}, 0, req.GetValidateOnly(), meta(ctx, method, req.GetRequestId(), req))
		if err != nil {
			return nil, p.fail(ctx, method, err)
		}
		return &ipamv1.UpdatePoolResponse{Pool: p.render(res.Pool, res.Rev)}, nil
	}
	if err != nil {
		return nil, p.fail(ctx, method, err)
	}
	merged := mergePool(cur.Pool, req.GetPool(), paths)
	next := poolFromProto(&fes, "pool", id, merged)
	if err := fes.Err(); err != nil {
		return nil, p.fail(ctx, method, err)
	}
	if etagRev == 0 {
		etagRev = cur.Rev // the merge was computed from this revision
	}
	res, err := p.s.w.UpdatePool(ctx, next, etagRev, req.GetValidateOnly(), meta(ctx, method, req.GetRequestId(), req))
	if err != nil {
		return nil, p.fail(ctx, method, err)
	}
	return &ipamv1.UpdatePoolResponse{Pool: p.render(res.Pool, res.Rev)}, nil
}

// mergePool returns the proto form of cur with the masked fields of in.
func mergePool(cur *ipam.Pool, in *ipamv1.Pool, paths []string) *ipamv1.Pool {
	out := poolToProto(cur, 0, nil)
	all := slices.Contains(paths, "*")
	set := func(f string) bool { return all || slices.Contains(paths, f) }
	if set("description") {
		out.Description = in.GetDescription()
	}
	if set("ranges") {
		out.Ranges = in.GetRanges()
	}
	if set("exclusions") {
		out.Exclusions = in.GetExclusions()
	}
	if set("auto_assign") {
		out.AutoAssign = in.AutoAssign
	}
	if set("avoid_buggy_ips") {
		out.AvoidBuggyIps = in.GetAvoidBuggyIps()
	}
	if set("tenants") {
		out.Tenants = in.GetTenants()
	}
	if set("allocation_policy") {
		out.AllocationPolicy = in.GetAllocationPolicy()
	}
	if set("labels") {
		out.Labels = in.GetLabels()
	}
	return out
}

func (p *poolService) DeletePool(ctx context.Context, req *ipamv1.DeletePoolRequest) (*ipamv1.DeletePoolResponse, error) {
	const method = "DeletePool"
	var fes ipam.FieldErrors
	id := parsePoolName(&fes, "name", req.GetName())
	etagRev := parseEtag(&fes, "etag", req.GetEtag())
	validRequestID(&fes, "request_id", req.GetRequestId())
	if err := fes.Err(); err != nil {
		return nil, p.fail(ctx, method, err)
	}
	res, err := p.s.w.DeletePool(ctx, id, etagRev, req.GetForce(), meta(ctx, method, req.GetRequestId(), req))
	if err != nil {
		return nil, p.fail(ctx, method, err)
	}
	return &ipamv1.DeletePoolResponse{ReleasedAllocations: int32(res.Released)}, nil
}
