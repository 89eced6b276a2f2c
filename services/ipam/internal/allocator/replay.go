package allocator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// replay is the stored result of a request with a request_id: all that
// its response shows, so that a retry answers exactly what the first
// request did, whatever happened to the object since (it may have been
// changed, released, or ended and created again by another request).
type replay struct {
	Name        string       `json:"name,omitempty"`
	Created     bool         `json:"created,omitempty"`
	Addrs       []netip.Addr `json:"addrs,omitempty"`
	HoldExpires time.Time    `json:"holdExpires,omitzero"`
	Released    int          `json:"released,omitempty"`
	// Allocation, Pool and Value are the object as the request left it:
	// an allocation, a pool, or an announcement config object or tenant
	// (encoded as stored, decoded by the kind of its ref).
	Allocation *ipam.Allocation `json:"allocation,omitempty"`
	Pool       *ipam.Pool       `json:"pool,omitempty"`
	Value      json.RawMessage  `json:"value,omitempty"`
	// Rev is the object's revision (its etag) when the request did not
	// write it (an Allocate that found its owner's allocation). Otherwise
	// 0: the object was written with the record, in one transaction, whose
	// revision is the record's.
	Rev int64 `json:"rev,omitempty"`
	// recordRev is the revision of the record itself.
	recordRev int64
}

// rev returns the revision of the object the replayed request returned.
func (r replay) rev() int64 {
	if r.Rev > 0 {
		return r.Rev
	}
	return r.recordRev
}

// replayed looks up a request_id; ok reports a stored result.
func (a *Allocator) replayed(ctx context.Context, tenant string, meta Meta) (replay, bool, error) {
	if meta.RequestID == "" {
		return replay{}, false, nil
	}
	ev, err := a.store.Get(ctx, ipam.Ref{Kind: ipam.KindRequest, ID: tenant + "/" + meta.RequestID})
	if errors.Is(err, ipam.ErrNotFound) {
		return replay{}, false, nil
	}
	if err != nil {
		return replay{}, false, err
	}
	rec := ev.Value.(*ipam.RequestRecord)
	if rec.Method != meta.Method || rec.Fingerprint != meta.Fingerprint {
		return replay{}, false, ipam.Refuse(ipam.ErrRequestIDReused, "request_id %q was used for a different request", meta.RequestID)
	}
	var r replay
	if err := json.Unmarshal(rec.Result, &r); err != nil {
		return replay{}, false, fmt.Errorf("allocator: stored request result: %w", err)
	}
	r.recordRev = ev.Rev
	return r, true, nil
}

// racedRetry looks up a request_id after a conflict: a retry sent while
// the first request was committing conflicts on the request record, and
// then answers what the first request committed.
func (a *Allocator) racedRetry(ctx context.Context, tenant string, meta Meta) (replay, bool, error) {
	if meta.RequestID == "" {
		return replay{}, false, nil
	}
	return a.replayed(ctx, tenant, meta)
}

// answeredAllocation looks up a request_id after a conflict: done reports
// that a request with the same ID committed first, and res is the
// allocation it answered (see replayAllocation).
func (a *Allocator) answeredAllocation(ctx context.Context, tenant string, meta Meta) (res Result, done bool, err error) {
	r, ok, err := a.racedRetry(ctx, tenant, meta)
	if err != nil {
		return Result{}, true, err
	}
	if !ok {
		return Result{}, false, nil
	}
	res, err = a.replayAllocation(ctx, tenant, r)
	return res, true, err
}

// replayAllocation returns the allocation a replayed Allocate or
// UpdateAllocation answered, as it answered it. A record written before
// records kept the allocation names it only: its allocation is read, and
// if it has ended or is another one, the retry is refused.
func (a *Allocator) replayAllocation(ctx context.Context, tenant string, r replay) (Result, error) {
	if r.Allocation != nil {
		return Result{Allocation: r.Allocation, Rev: r.rev(), Created: r.Created}, nil
	}
	ev, err := a.store.Get(ctx, ipam.RefOf(ipam.KindAllocation, tenant, idOf(r.Name)))
	if err != nil {
		if errors.Is(err, ipam.ErrNotFound) {
			return Result{}, ipam.Refuse(ipam.ErrNotFound, "%s was allocated by this request_id but has since been released", r.Name)
		}
		return Result{}, err
	}
	if ev.Rev > r.recordRev {
		return Result{}, ipam.Refuse(ipam.ErrNotFound, "%s has changed since this request_id's request; its answer is no longer known", r.Name)
	}
	return Result{Allocation: ev.Value.(*ipam.Allocation), Rev: ev.Rev, Created: r.Created}, nil
}

// recordExisting writes the request record of an Allocate that found its
// owner's allocation, on the condition that the allocation is still at the
// revision read; ipam.ErrConflict if it changed meanwhile.
func (a *Allocator) recordExisting(ctx context.Context, res Result, meta Meta) error {
	al := res.Allocation
	ch := ipam.Change{Conds: []ipam.Cond{{Ref: ipam.RefOf(ipam.KindAllocation, al.Tenant, al.ID), Rev: res.Rev}}}
	a.addRequest(&ch, al.Tenant, meta, replay{Name: nameOf(al), Allocation: al, Rev: res.Rev})
	_, _, err := a.store.Commit(ctx, ch)
	return err
}

// addLog adds the audit record, and the request record if the request has
// an ID, to a change.
func (a *Allocator) addLog(ch *ipam.Change, action ipam.Action, al *ipam.Allocation, meta Meta, now time.Time, r replay) {
	rec := &ipam.AuditRecord{
		Tenant: al.Tenant, ID: auditID(now), Time: now, Action: action, Actor: meta.Actor,
		Allocation: al.ID, Owner: al.Owner, Addrs: al.Addrs, Pool: al.Pool, RequestID: meta.RequestID,
	}
	ch.Puts = append(ch.Puts, ipam.Put{Ref: ipam.Ref{Kind: ipam.KindAudit, ID: rec.Key()}, Value: rec})
	a.addRequest(ch, al.Tenant, meta, r)
}

// addRequest adds the record of a request with a request_id to a change;
// the change then fails if the ID was used meanwhile.
func (a *Allocator) addRequest(ch *ipam.Change, tenant string, meta Meta, r replay) {
	if meta.RequestID == "" {
		return
	}
	result, err := json.Marshal(r)
	if err != nil {
		return // a replay struct always encodes
	}
	ref := ipam.Ref{Kind: ipam.KindRequest, ID: tenant + "/" + meta.RequestID}
	ch.Conds = append(ch.Conds, ipam.Cond{Ref: ref})
	ch.Puts = append(ch.Puts, ipam.Put{Ref: ref, Value: &ipam.RequestRecord{
		Tenant: tenant, ID: meta.RequestID, Method: meta.Method, Fingerprint: meta.Fingerprint, Result: result,
	}})
}

func nameOf(a *ipam.Allocation) string {
	return "tenants/" + a.Tenant + "/allocations/" + a.ID
}

// idOf returns the allocation ID of a name "tenants/T/allocations/ID".
func idOf(name string) string {
	_, id, _ := strings.Cut(name, "/allocations/")
	return id
}
