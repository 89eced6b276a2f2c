package server

import (
	"context"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/filter"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

type auditService struct {
	ipamv1.UnsafeAuditServiceServer
	s *Server
}

var actionNames = map[string]ipam.Action{
	"ALLOCATE": ipam.ActionAllocate, "RELEASE": ipam.ActionRelease, "RENEW": ipam.ActionRenew,
	"EXPIRE": ipam.ActionExpire, "HOLD_END": ipam.ActionHoldEnd,
}

func (a *auditService) ListAuditRecords(ctx context.Context, req *ipamv1.ListAuditRecordsRequest) (*ipamv1.ListAuditRecordsResponse, error) {
	const method = "ListAuditRecords"
	var fes ipam.FieldErrors
	tenant := parseParent(&fes, "parent", req.GetParent(), true)
	size := pageSize(&fes, "page_size", req.GetPageSize())
	f, err := filter.Parse(req.GetFilter(), "action", "owner", "pool", "address", "actor")
	if err != nil {
		fes.Add("filter", "%s", err.Error())
	}
	for _, t := range f.Terms {
		if _, ok := actionNames[t.Value]; t.Field == "action" && !ok {
			fes.Add("filter", "action must be one of ALLOCATE, RELEASE, RENEW, EXPIRE, HOLD_END")
		}
	}
	f = normalizePoolTerms(f)
	q := queryHash(req.GetParent(), req.GetFilter())
	after := decodePageToken(&fes, "page_token", req.GetPageToken(), q)
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, a.s.logger, method, err)
	}
	prefix := tenant + "/"
	if tenant == "-" {
		prefix = ""
	}
	resp := &ipamv1.ListAuditRecordsResponse{}
	var rev int64
	for {
		page, err := a.s.r.List(ctx, ipam.KindAudit, prefix, after, max(size, 500), rev)
		if err != nil {
			return nil, toStatus(ctx, a.s.logger, method, err)
		}
		rev = page.Revision
		for i, ev := range page.Items {
			after = ev.Ref.ID
			r := ev.Value.(*ipam.AuditRecord)
			if !matchAudit(f, r) {
				continue
			}
			resp.AuditRecords = append(resp.AuditRecords, auditToProto(r))
			if len(resp.AuditRecords) == size {
				if page.More || i < len(page.Items)-1 {
					resp.NextPageToken = encodePageToken(after, q)
				}
				return resp, nil
			}
		}
		if !page.More {
			return resp, nil
		}
	}
}

func matchAudit(f filter.Filter, r *ipam.AuditRecord) bool {
	addrs := addrsToProto(r.Addrs)
	if len(addrs) == 0 {
		addrs = []string{""}
	}
	for _, addr := range addrs {
		get := func(field string) (string, bool) {
			switch field {
			case "action":
				for name, act := range actionNames {
					if act == r.Action {
						return name, true
					}
				}
				return "", false
			case "owner":
				return r.Owner, true
			case "pool":
				return r.Pool, true
			case "actor":
				return r.Actor, true
			case "address":
				return addr, addr != ""
			}
			return "", false
		}
		if f.Match(get, nil) {
			return true
		}
	}
	return false
}
