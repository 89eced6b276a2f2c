package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Audit records are written one key per tenant per transaction: the records
// of the changes a group commit packs together (releases, renewals,
// expiries, hold ends) share one key, a JSON array, so that under load the
// audit log costs etcd a fraction of a key per change instead of one. A
// record alone keeps a key of its own, a JSON object, as does the record of
// an allocation's creation when the allocation ends (ipam.Put.Alone).
//
// A pack holds its records in ID order, newest first (audit IDs invert
// time), as the log lists them. A packed record's ID is the key's ID (the
// ID of its first record) and its position, "<id>-000": it sorts right
// after its key's ID and before any other key's, so listing in ID order and
// resuming after any record work across packed and single keys alike.

// packSep separates a pack's ID from a record's position in it; audit IDs
// are hex and never hold it.
const packSep = "-"

// auditPack is the audit records of one tenant in one transaction.
type auditPack struct {
	tenant string
	recs   []*ipam.AuditRecord
}

// packAudit returns the key and value of a pack.
func packAudit(p *auditPack) (ipam.Ref, []byte, error) {
	if len(p.recs) == 1 {
		r := p.recs[0]
		b, err := encode(ipam.KindAudit, r)
		return ipam.Ref{Kind: ipam.KindAudit, ID: r.Key()}, b, err
	}
	recs := slices.SortedFunc(slices.Values(p.recs), func(a, b *ipam.AuditRecord) int { return strings.Compare(a.ID, b.ID) })
	id := recs[0].ID
	out := make([]ipam.AuditRecord, len(recs))
	for i, r := range recs {
		out[i] = *r
		out[i].ID = fmt.Sprintf("%s%s%03d", id, packSep, i)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return ipam.Ref{}, nil, fmt.Errorf("store: encode audit pack: %w", err)
	}
	return ipam.Ref{Kind: ipam.KindAudit, ID: p.tenant + "/" + id}, b, nil
}

// unpackAudit decodes an audit key's value: one record, or a pack.
func unpackAudit(b []byte) ([]*ipam.AuditRecord, error) {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		var recs []*ipam.AuditRecord
		if err := json.Unmarshal(t, &recs); err != nil {
			return nil, fmt.Errorf("store: decode audit pack: %w", err)
		}
		return recs, nil
	}
	v, err := decode(ipam.KindAudit, b)
	if err != nil {
		return nil, err
	}
	return []*ipam.AuditRecord{v.(*ipam.AuditRecord)}, nil
}

// auditResume returns where a listing that resumes after the record
// startAfter ("tenant/id" or "tenant/id-NNN") starts: the key holding it,
// included when the record is packed (its later records are still to come).
func auditResume(startAfter string) (keyID string, inclusive bool) {
	slash := strings.LastIndex(startAfter, "/")
	if i := strings.LastIndex(startAfter, packSep); i > slash {
		return startAfter[:i], true
	}
	return startAfter, false
}
