package index

import (
	"slices"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// CreationRecords returns the audit records of the creation of live
// allocations (see ipam.Allocation.Created) whose "tenant/id" starts with
// idPrefix and sorts after startAfter: the first limit of them in that
// order, and whether there are more. They are the part of the audit log
// still kept in the allocations themselves.
//
// It walks the allocations of the prefix's tenant (every allocation for an
// empty prefix), once per call.
func (x *Index) CreationRecords(idPrefix, startAfter string, limit int) (recs []*ipam.AuditRecord, more bool) {
	tenant, oneTenant := strings.CutSuffix(idPrefix, "/")
	type kept struct {
		id string
		a  *ipam.Allocation
	}
	var found []kept
	x.mu.Lock()
	for _, e := range x.allocs {
		if e.a.Created == nil || (oneTenant && e.a.Tenant != tenant) {
			continue
		}
		if id := e.a.Tenant + "/" + e.a.Created.AuditID; id > startAfter && strings.HasPrefix(id, idPrefix) {
			found = append(found, kept{id, e.a}) // allocations are replaced, never changed in place
		}
	}
	x.mu.Unlock()
	slices.SortFunc(found, func(a, b kept) int { return strings.Compare(a.id, b.id) })
	if len(found) > limit {
		found, more = found[:limit], true
	}
	recs = make([]*ipam.AuditRecord, len(found))
	for i, k := range found {
		recs[i] = k.a.CreationRecord()
	}
	return recs, more
}
