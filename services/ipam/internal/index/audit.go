package index

import (
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// creationSet is one tenant's live allocations that keep their creation
// record, by the record's ID (the allocation's own string: the set costs a
// map entry per allocation), with those IDs in order (nil when a new ID made
// them stale: sorted again by the next listing; IDs since forgotten may
// linger in it, and are skipped).
type creationSet struct {
	byID   map[string]*ipam.Allocation
	sorted []string
}

// keepCreation and forgetCreation keep x.creations in step with x.allocs.
func (x *Index) keepCreation(a *ipam.Allocation) {
	if a.Created == nil {
		return
	}
	set := x.creations[a.Tenant]
	if set == nil {
		set = &creationSet{byID: make(map[string]*ipam.Allocation)}
		x.creations[a.Tenant] = set
	}
	if _, ok := set.byID[a.Created.AuditID]; !ok {
		set.sorted = nil
	}
	set.byID[a.Created.AuditID] = a
}

func (x *Index) forgetCreation(a *ipam.Allocation) {
	if a.Created == nil {
		return
	}
	set := x.creations[a.Tenant]
	if set == nil {
		return
	}
	// sorted keeps the ID (listings skip it): an update or renewal, which
	// forgets and keeps the same ID, then does not make it stale.
	delete(set.byID, a.Created.AuditID)
	if len(set.byID) == 0 {
		delete(x.creations, a.Tenant)
	}
}

// ids returns the set's IDs in order, sorting them if a change made them
// stale.
func (s *creationSet) ids() []string {
	if s.sorted == nil {
		s.sorted = slices.Sorted(maps.Keys(s.byID))
	}
	return s.sorted
}

// CreationRecords returns the audit records of the creation of live
// allocations (see ipam.Allocation.Created) whose "tenant/id" starts with
// idPrefix and sorts after startAfter: the first limit of them in that
// order, and whether there are more. They are the part of the audit log
// still kept in the allocations themselves.
//
// A page costs a binary search in each tenant's sorted IDs the prefix
// covers, and the page itself; a tenant's IDs are sorted again only after
// a change to its allocations' records, not for every page: a million
// allocations are not walked per page.
func (x *Index) CreationRecords(idPrefix, startAfter string, limit int) (recs []*ipam.AuditRecord, more bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	// Tenants in the order of their IDs' prefix "tenant/", the order of
	// the IDs themselves.
	var tenants []string
	for t := range x.creations {
		p := t + "/"
		if strings.HasPrefix(p, idPrefix) || strings.HasPrefix(idPrefix, p) {
			tenants = append(tenants, t)
		}
	}
	slices.SortFunc(tenants, func(a, b string) int { return strings.Compare(a+"/", b+"/") })
	from := max(startAfter, idPrefix)
	for _, t := range tenants {
		set, p := x.creations[t], t+"/"
		ids := set.ids()
		i := 0
		switch {
		case strings.HasPrefix(from, p):
			i = sort.SearchStrings(ids, from[len(p):])
		case from > p:
			continue // every "t/id" sorts before from
		}
		for ; i < len(ids); i++ {
			id := p + ids[i]
			if id <= startAfter {
				continue
			}
			if !strings.HasPrefix(id, idPrefix) {
				break // sorted: no later ID of this tenant has the prefix
			}
			a, live := set.byID[ids[i]]
			if !live {
				continue
			}
			if len(recs) == limit {
				return recs, true
			}
			recs = append(recs, a.CreationRecord()) // allocations are replaced, never changed in place
		}
	}
	return recs, false
}
