package server

import (
	"context"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/filter"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
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
	q := queryHash("ListAuditRecords", req.GetParent(), req.GetFilter())
	after := a.s.pages.decode(&fes, "page_token", req.GetPageToken(), q)
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, a.s.logger, method, err)
	}
	prefix := tenant + "/"
	if tenant == "-" {
		prefix = ""
	}
	log := &auditLog{r: a.s.r, kept: a.s.creations, prefix: prefix, after: after, limit: max(size, 500)}
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
			more, err := log.more(ctx)
			if err != nil {
				return nil, toStatus(ctx, a.s.logger, method, err)
			}
			if more {
				resp.NextPageToken = a.s.pages.encode(r.Key(), q)
			}
			return resp, nil
		}
	}
}

// auditLog reads the audit log in ID order: the records stored in etcd,
// merged with the creation records live allocations still keep (see
// ipam.Allocation.Created).
//
// It reads both in rounds from its cursor: first the kept records (from an
// index that has caught up with etcd), then the stored ones, and hands out
// records only up to where the first of the two stopped short. No record
// is missed: an allocation ended after the index was read has its record
// in etcd by the time etcd is read. One ended in between is in both, with
// the same ID, and is listed once.
type auditLog struct {
	r      Reader
	kept   Creations // nil: none
	prefix string
	after  string // the cursor: records up to it are handed out
	limit  int

	read     bool // a round is buffered
	keptRecs []*ipam.AuditRecord
	stored   []ipam.Event
	last     bool   // the round reaches the end of the log
	bound    string // else: records after it wait for the next round
}

// round buffers the records after the cursor.
func (l *auditLog) round(ctx context.Context) error {
	var keptMore bool
	l.keptRecs = nil
	if l.kept != nil {
		recs, more, err := l.kept.CreationRecords(ctx, l.prefix, l.after, l.limit)
		if err != nil {
			return err
		}
		l.keptRecs, keptMore = recs, more
	}
	page, err := l.r.List(ctx, ipam.KindAudit, l.prefix, l.after, l.limit, 0)
	if err != nil {
		return err
	}
	l.stored = page.Items
	l.read, l.last, l.bound = true, true, ""
	stop := func(id string) {
		if l.last || id < l.bound {
			l.bound = id
		}
		l.last = false
	}
	if keptMore {
		stop(l.keptRecs[len(l.keptRecs)-1].Key())
	}
	if n := len(page.Items); page.More && n > 0 {
		stop(page.Items[n-1].Ref.ID)
	}
	return nil
}

// head returns the lowest buffered record of the round and whether it is
// a stored one; nil when the round is used up.
func (l *auditLog) head() (r *ipam.AuditRecord, stored bool) {
	for {
		r, id := (*ipam.AuditRecord)(nil), ""
		if len(l.stored) > 0 {
			r, id, stored = l.stored[0].Value.(*ipam.AuditRecord), l.stored[0].Ref.ID, true
		}
		if len(l.keptRecs) > 0 {
			k := l.keptRecs[0]
			switch kid := k.Key(); {
			case kid == id:
				l.keptRecs = l.keptRecs[1:] // ended since: the stored copy is listed
				continue
			case r == nil || kid < id:
				r, id, stored = k, kid, false
			}
		}
		if r == nil || (!l.last && id > l.bound) {
			return nil, false
		}
		return r, stored
	}
}

// peek returns the next record without taking it; nil at the end.
func (l *auditLog) peek(ctx context.Context) (*ipam.AuditRecord, bool, error) {
	for {
		if !l.read {
			if err := l.round(ctx); err != nil {
				return nil, false, err
			}
		}
		if r, stored := l.head(); r != nil || l.last {
			return r, stored, nil
		}
		l.after, l.read = l.bound, false // everything up to the bound is handed out
	}
}

// next takes the next record; ok is false at the end of the log.
func (l *auditLog) next(ctx context.Context) (*ipam.AuditRecord, bool, error) {
	r, stored, err := l.peek(ctx)
	if r == nil || err != nil {
		return nil, false, err
	}
	if stored {
		l.stored = l.stored[1:]
	} else {
		l.keptRecs = l.keptRecs[1:]
	}
	l.after = r.Key()
	return r, true, nil
}

// more reports whether any record remains.
func (l *auditLog) more(ctx context.Context) (bool, error) {
	r, _, err := l.peek(ctx)
	return r != nil, err
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
		if f.Match(get, selector.Set{}) {
			return true
		}
	}
	return false
}
