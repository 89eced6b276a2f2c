package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// auditSource is a sorted set of audit records, served as a page of
// etcd's log (Reader) or as the records live allocations keep (Creations).
// onRead, if set, runs before each read.
type auditSource struct {
	ids    []string // "tenant/id", sorted
	onRead func()
}

func (s *auditSource) after(prefix, startAfter string, limit int) (recs []*ipam.AuditRecord, more bool) {
	if s.onRead != nil {
		s.onRead()
	}
	for _, id := range s.ids {
		if !strings.HasPrefix(id, prefix) || id <= startAfter {
			continue
		}
		if len(recs) == limit {
			return recs, true
		}
		tenant, rid, _ := strings.Cut(id, "/")
		recs = append(recs, &ipam.AuditRecord{Tenant: tenant, ID: rid})
	}
	return recs, false
}

func (s *auditSource) CreationRecords(_ context.Context, prefix, startAfter string, limit int) ([]*ipam.AuditRecord, bool, error) {
	recs, more := s.after(prefix, startAfter, limit)
	return recs, more, nil
}

func (s *auditSource) List(_ context.Context, kind ipam.Kind, prefix, startAfter string, limit int, _ int64) (ipam.Page, error) {
	if kind != ipam.KindAudit {
		return ipam.Page{}, fmt.Errorf("list of kind %d", kind)
	}
	recs, more := s.after(prefix, startAfter, limit)
	page := ipam.Page{More: more}
	for _, r := range recs {
		page.Items = append(page.Items, ipam.Event{Ref: ipam.Ref{Kind: kind, ID: r.Tenant + "/" + r.ID}, Value: r})
	}
	return page, nil
}

func (s *auditSource) Get(context.Context, ipam.Ref) (ipam.Event, error) { return ipam.Event{}, nil }
func (s *auditSource) WatchKind(context.Context, ipam.Kind, string, int64, func([]ipam.Event, int64)) error {
	return nil
}

func (s *auditSource) move(id string, to *auditSource) {
	s.ids = slices.DeleteFunc(s.ids, func(x string) bool { return x == id })
	to.ids = append(to.ids, id)
	slices.Sort(to.ids)
}

// The listing merges etcd's log with the kept records in rounds of limit:
// every record once, in ID order, whichever source runs out first, and
// also when records move from the kept set to the log while it reads.
func TestAuditLogMerge(t *testing.T) {
	for _, tc := range []struct {
		name         string
		stored, kept []string
		prefix       string
		moving       []string // moved from kept to stored, one before each read
	}{
		{name: "empty"},
		{name: "stored only", stored: []string{"a/1", "a/2", "a/3", "a/4", "a/5"}},
		{name: "kept only", kept: []string{"a/1", "a/2", "a/3", "a/4", "a/5"}},
		{name: "interleaved", stored: []string{"a/1", "a/4", "a/5", "a/8"}, kept: []string{"a/2", "a/3", "a/6", "a/7", "a/9"}},
		{name: "in both", stored: []string{"a/1", "a/2", "a/3"}, kept: []string{"a/2", "a/3", "a/4"}},
		{name: "one tenant", stored: []string{"a-b/1", "a/1", "a/3", "b/1"}, kept: []string{"a-b/2", "a/2", "b/2"}, prefix: "a/"},
		{name: "all tenants", stored: []string{"a-b/1", "a/1", "a/3", "b/1"}, kept: []string{"a-b/2", "a/2", "b/2"}},
		{
			name: "moving", stored: []string{"a/1", "a/5"}, kept: []string{"a/2", "a/3", "a/4", "a/6", "a/7"},
			moving: []string{"a/2", "a/4", "a/7", "a/6"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for _, id := range slices.Concat(tc.stored, tc.kept) {
				if strings.HasPrefix(id, tc.prefix) {
					want = append(want, id)
				}
			}
			slices.Sort(want)
			want = slices.Compact(want)
			for _, limit := range []int{1, 2, 3, 100} {
				stored := &auditSource{ids: slices.Clone(tc.stored)}
				kept := &auditSource{ids: slices.Clone(tc.kept)}
				moving := slices.Clone(tc.moving)
				// A record moves before each read of either source: after
				// the kept set was read it is in both, before, in the log.
				move := func() {
					if len(moving) > 0 {
						kept.move(moving[0], stored)
						moving = moving[1:]
					}
				}
				kept.onRead, stored.onRead = move, move
				l := &auditLog{r: stored, kept: kept, prefix: tc.prefix, limit: limit}
				var got []string
				for {
					more, err := l.more(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					r, ok, err := l.next(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					if ok != more {
						t.Fatalf("more() = %v, then next() ok = %v", more, ok)
					}
					if !ok {
						break
					}
					got = append(got, r.Tenant+"/"+r.ID)
					if len(got) > 100 {
						t.Fatal("the listing does not end")
					}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("limit %d: records (-want +got):\n%s", limit, diff)
				}
			}
		})
	}
}
