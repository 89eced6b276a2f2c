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
	log := newAuditLog(a.s.r, a.s.creations.CreationRecords(prefix, after), prefix, after, max(size, 500))
	resp := &ipamv1.ListAuditRecordsResponse{}
	for {
		r, ok, err := log.next(ctx)
		if err != nil {
			return nil, toStatus(ctx, a.s.logger, method, err)
		}
		if !ok {
			return resp, nil
		}
		if !matchAudit(f, r) {
			continue
		}
		resp.AuditRecords = append(resp.AuditRecords, auditToProto(r))
		if len(resp.AuditRecords) == size {
			if more, err := log.more(ctx); err != nil || more {
				if err != nil {
					return nil, toStatus(ctx, a.s.logger, method, err)
				}
				resp.NextPageToken = encodePageToken(r.Tenant+"/"+r.ID, q)
			}
			return resp, nil
		}
	}
}

// auditLog reads the audit log in ID order: the records stored in etcd,
// merged with the creation records that live allocations still keep (see
// ipam.Allocation.Created). Those are taken from the index before the first
// read of etcd, so a record is never missed: an allocation ended since the
// index saw it has its record in etcd by then (listed once: the stored
// copy, with the same ID, wins).
type auditLog struct {
	r       Reader
	kept    []*ipam.AuditRecord
	prefix  string
	after   string
	limit   int
	rev     int64
	page    []ipam.Event
	fetched bool // a page was read and nothing remains in etcd after it
}

func newAuditLog(r Reader, kept []*ipam.AuditRecord, prefix, after string, limit int) *auditLog {
	return &auditLog{r: r, kept: kept, prefix: prefix, after: after, limit: limit}
}

// fill reads the next page of stored records when the current one is used
// up and etcd may hold more.
func (l *auditLog) fill(ctx context.Context) error {
	for len(l.page) == 0 && !l.fetched {
		page, err := l.r.List(ctx, ipam.KindAudit, l.prefix, l.after, l.limit, l.rev)
		if err != nil {
			return err
		}
		l.rev = page.Revision // later pages at the first one's revision
		l.page = page.Items
		l.fetched = !page.More
		if n := len(page.Items); n > 0 {
			l.after = page.Items[n-1].Ref.ID
		}
	}
	return nil
}

// next returns the next record; ok is false at the end of the log.
func (l *auditLog) next(ctx context.Context) (*ipam.AuditRecord, bool, error) {
	if err := l.fill(ctx); err != nil {
		return nil, false, err
	}
	var stored *ipam.AuditRecord
	var storedID string
	if len(l.page) > 0 {
		stored, storedID = l.page[0].Value.(*ipam.AuditRecord), l.page[0].Ref.ID
	}
	if len(l.kept) > 0 {
		k := l.kept[0]
		switch id := k.Tenant + "/" + k.ID; {
		case stored == nil || id < storedID:
			l.kept = l.kept[1:]
			return k, true, nil
		case id == storedID:
			l.kept = l.kept[1:] // stored since the index was read
		}
	}
	if stored == nil {
		return nil, false, nil
	}
	l.page = l.page[1:]
	return stored, true, nil
}

// more reports whether any record remains.
func (l *auditLog) more(ctx context.Context) (bool, error) {
	if err := l.fill(ctx); err != nil {
		return false, err
	}
	return len(l.page) > 0 || len(l.kept) > 0, nil
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
