package index

import (
	"fmt"
	"strings"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/assign"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Reservation is a decision being committed, with what the index keeps for it
// meanwhile: the free addresses it takes, its sharing key and what it adds
// to its tenant's count. Commit its Change; then call Committed or, on
// conflict, Unreserve.
type Reservation struct {
	*assign.Decision
	reserved []assign.Take
	// done is set on a plan that reserves addresses or allocates under a
	// sharing key (share): it is closed when the plan is committed or
	// given up.
	share *assign.ShareKey
	done  chan struct{}
	// adds is how many addresses the plan adds to its tenant's (Alloc's)
	// count while it is in flight (see Index.adding).
	adds uint64
}

// Decide asks decide for a decision on the index's state, held still under
// its lock, and reserves what the decision takes until it is committed or
// given up: concurrent decisions then pick other addresses, count it
// against the tenant's quota, and wait for it under its sharing key (see
// assign.Pending).
func (x *Index) Decide(decide func(assign.State) (*assign.Decision, error)) (*Reservation, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	d, err := decide(view{x})
	if err != nil {
		return nil, err
	}
	if d == nil {
		return nil, nil
	}
	p := &Reservation{Decision: d}
	for _, t := range d.Takes {
		x.reserve(t, p)
	}
	if d.Adds > 0 {
		p.adds = d.Adds
		x.adding[d.Alloc.Tenant] += d.Adds
	}
	if d.Share != nil {
		p.share = d.Share
		if p.done == nil {
			p.done = make(chan struct{})
		}
		x.inFlight[*d.Share] = p
	}
	return p, nil
}

// Committed applies a plan's writes at the revision they were committed at
// and ends its reservations.
func (x *Index) Committed(p *Reservation, rev int64) {
	events := make([]ipam.Event, 0, len(p.Change.Puts)+len(p.Change.Deletes))
	for _, w := range p.Change.Puts {
		events = append(events, ipam.Event{Ref: w.Ref, Value: w.Value, Rev: rev})
	}
	for _, r := range p.Change.Deletes {
		events = append(events, ipam.Event{Ref: r, Rev: rev})
	}
	x.Apply(events, 0)
	x.Unreserve(p)
}

// reserve takes an address out of its pool's free list while a plan that
// uses it is being committed, so that concurrent plans pick other
// addresses.
func (x *Index) reserve(t assign.Take, by *Reservation) {
	if by.done == nil {
		by.done = make(chan struct{})
	}
	x.reserved[t.Addr] = by
	by.reserved = append(by.reserved, t)
	if e, ok := x.pools[t.Pool]; ok {
		e.take(t.Addr)
	}
}

// Unreserve ends the reservations of a plan: after its commit was applied
// (the claims now hold the addresses) or after it failed (they are free again
// unless someone else claimed them).
func (x *Index) Unreserve(p *Reservation) {
	if p == nil || (len(p.reserved) == 0 && p.done == nil && p.adds == 0) {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.unreserveLocked(p)
}

func (x *Index) unreserveLocked(p *Reservation) {
	for _, r := range p.reserved {
		delete(x.reserved, r.Addr)
		if _, claimed := x.claims[r.Addr]; claimed {
			continue
		}
		if e, ok := x.pools[r.Pool]; ok {
			e.give(r.Addr)
		}
	}
	p.reserved = nil
	if p.adds > 0 {
		t := p.Alloc.Tenant
		if x.adding[t] -= p.adds; x.adding[t] == 0 {
			delete(x.adding, t)
		}
		p.adds = 0
	}
	if p.done != nil {
		if p.share != nil && x.inFlight[*p.share] == p {
			delete(x.inFlight, *p.share)
		}
		close(p.done)
		p.done = nil
	}
}

// Hold returns the hold kept for the released allocation tenant/id.
func (x *Index) Hold(tenant, id string) (*ipam.Hold, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	h, ok := x.holds[tenant+"/"+id]
	if !ok {
		return nil, false
	}
	return h.h, true
}

// DescribeClaim says who uses a claimed address: "allocated to OWNER"
// (owners, when shared), or "held for released OWNER until TIME".
func (x *Index) DescribeClaim(c *ipam.Claim) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(c.Holders) == 0 && c.HeldFor != "" {
		if h, ok := x.holds[c.Tenant+"/"+c.HeldFor]; ok {
			return fmt.Sprintf("held for released %s until %s", h.h.Allocation.Owner, h.h.ExpireTime.UTC().Format(time.RFC3339))
		}
		return "held for a released owner"
	}
	var owners []string
	for _, hd := range c.Holders {
		if e, ok := x.allocs[hd.TenantIn(c)+"/"+hd.Allocation]; ok {
			owners = append(owners, e.a.Owner)
		}
	}
	if len(owners) == 0 {
		return "allocated"
	}
	return "allocated to " + strings.Join(owners, ", ")
}
