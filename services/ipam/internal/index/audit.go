package index

import (
	"slices"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// CreationRecords returns the audit records of the creation of live
// allocations (see ipam.Allocation.Created) whose "tenant/id" starts with
// idPrefix and sorts after startAfter, in that order: the part of the audit
// log that is still kept in the allocations themselves.
func (x *Index) CreationRecords(idPrefix, startAfter string) []*ipam.AuditRecord {
	x.mu.Lock()
	var recs []*ipam.AuditRecord
	for _, e := range x.allocs {
		rec := e.a.CreationRecord()
		if rec == nil {
			continue
		}
		if id := rec.Tenant + "/" + rec.ID; strings.HasPrefix(id, idPrefix) && id > startAfter {
			recs = append(recs, rec)
		}
	}
	x.mu.Unlock()
	slices.SortFunc(recs, func(a, b *ipam.AuditRecord) int {
		return strings.Compare(a.Tenant+"/"+a.ID, b.Tenant+"/"+b.ID)
	})
	return recs
}
