package index

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Plan is a proposed change to the state, computed from the index. Commit
// its Change; then call Committed or, on conflict, Unreserve.
type Plan struct {
	// Reclaims is set when the plan takes addresses held for a released
	// owner because its pool had nothing else: a decision on the whole
	// pool that no condition of the change guards, so the caller makes it
	// on a view caught up with etcd.
	Reclaims bool
	// Existing is set when the owner already holds an allocation that
	// satisfies the request: nothing to commit.
	Existing *ipam.Allocation
	// Alloc is the allocation the change writes (nil for deletions).
	Alloc *ipam.Allocation
	// Before is the allocation or hold the change ends, for audit.
	Before *ipam.Allocation
	// Change is what to commit.
	Change   ipam.Change
	reserved []reservation
	// done is set on a plan that reserves addresses or allocates under a
	// sharing key (share): it is closed when the plan is committed or
	// given up.
	share *shareKey
	done  chan struct{}
	// adds is how many addresses the plan adds to its tenant's (Alloc's)
	// count while it is in flight (see Index.adding).
	adds uint64
}

// Pending is returned by PlanAllocate when a plan this replica is
// committing decides what this one may get: the caller waits for Done and
// plans again. Either the other plan allocates under the same sharing key
// (the two then share one address, when their ports allow, instead of
// taking two), or it has reserved an address this plan needs: the last
// free ones of a family, or the one requested. The reservation may still
// fail, so the pool is neither exhausted nor the address in use (and no
// hold is reclaimed) until it is settled.
type Pending struct {
	Done <-chan struct{}
}

func (e *Pending) Error() string {
	return "an allocation being committed holds what this one needs"
}

type reservation struct {
	addr netip.Addr
	pool string
}

// Committed applies a plan's writes at the revision they were committed at
// and ends its reservations.
func (x *Index) Committed(p *Plan, rev int64) {
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

// RefOf returns the ref of an allocation or hold by tenant and ID.
func RefOf(kind ipam.Kind, tenant, id string) ipam.Ref {
	return ipam.Ref{Kind: kind, ID: tenant + "/" + id}
}

// ClaimRef returns the ref of the claim of an address (of an IPv4-mapped
// IPv6 address, its IPv4 form's).
func ClaimRef(a netip.Addr) ipam.Ref { return ipam.Ref{Kind: ipam.KindClaim, ID: a.Unmap().String()} }

// builder accumulates a plan under the index lock.
type builder struct {
	x      *Index
	plan   *Plan
	claims map[netip.Addr]*ipam.Claim // the claims the plan writes
}

func (b *builder) cond(r ipam.Ref) {
	for _, c := range b.plan.Change.Conds {
		if c.Ref == r {
			return
		}
	}
	b.plan.Change.Conds = append(b.plan.Change.Conds, ipam.Cond{Ref: r, Rev: b.x.liveRev(r)})
}

func (b *builder) put(r ipam.Ref, v any) {
	b.cond(r)
	b.plan.Change.Puts = append(b.plan.Change.Puts, ipam.Put{Ref: r, Value: v})
}

func (b *builder) del(r ipam.Ref) {
	b.cond(r)
	b.plan.Change.Deletes = append(b.plan.Change.Deletes, r)
}

// PlanAllocate plans an allocation for req (its Tenant, Owner and request
// fields set). The result either names the owner's existing allocation or
// carries the change that creates a new one.
func (x *Index) PlanAllocate(req *ipam.Allocation, now time.Time) (*Plan, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	req.ID = ipam.AllocationID(req.Owner)
	id := req.Tenant + "/" + req.ID
	if e, ok := x.allocs[id]; ok {
		if e.a.Owner != req.Owner {
			return nil, ipam.Refuse(ipam.ErrOwnerConflict, "owner %q collides with owner %q", req.Owner, e.a.Owner)
		}
		if ipam.Satisfies(e.a, req) {
			return &Plan{Existing: e.a}, nil
		}
		return nil, ipam.Refuse(ipam.ErrOwnerConflict, "owner %q already holds %v from pool %q; release it first", req.Owner, e.a.Addrs, e.a.Pool)
	}
	var share *shareKey
	if k, ok := allocShareKey(req); ok {
		share = &k
		if p := x.inFlight[*share]; p != nil {
			return nil, &Pending{Done: p.done}
		}
	}
	b := &builder{x: x, plan: &Plan{}, claims: make(map[netip.Addr]*ipam.Claim)}
	a := *req
	a.Addrs, a.Pool = nil, ""
	a.CreateTime, a.UpdateTime = now, now
	if a.TTL > 0 {
		a.ExpireTime = now.Add(a.TTL)
	}
	b.plan.Alloc = &a
	allocRef := RefOf(ipam.KindAllocation, a.Tenant, a.ID)
	b.cond(allocRef) // must not exist: the index has no revision for it
	// The owner's hold, as the index knows it (absent: must not exist), so
	// that an index that has not seen a release with a hold yet learns of
	// it from the conflict instead of handing out a new address while the
	// held one leaks until the hold ends.
	b.cond(RefOf(ipam.KindHold, req.Tenant, req.ID))

	hold, hasHold := x.holds[id]
	var err error
	switch {
	case req.GlobalGroup != "":
		err = b.joinGroup(&a)
	case hasHold && x.holdFits(hold.h, req):
		err = b.fromHold(&a, hold.h)
	case len(req.RequestedAddrs) > 0:
		err = b.requested(&a)
	default:
		err = b.fromPools(&a)
	}
	if err != nil {
		x.unreserveLocked(b.plan)
		return nil, err
	}
	// Allocations being committed count too: without them, concurrent
	// requests would all pass against the same committed count.
	q := x.quotas[a.Tenant] // 0: no quota
	if q > 0 && x.used[a.Tenant]+x.adding[a.Tenant]+uint64(len(a.Addrs)) > q {
		x.unreserveLocked(b.plan)
		return nil, ipam.Refuse(ipam.ErrQuotaExceeded, "tenant %q holds %d of its %d addresses (%d more being allocated); %d more would exceed its quota",
			a.Tenant, x.used[a.Tenant], q, x.adding[a.Tenant], len(a.Addrs))
	}
	b.plan.adds = uint64(len(a.Addrs))
	x.adding[a.Tenant] += b.plan.adds
	if hasHold && a.Addrs != nil && !slices.Equal(a.Addrs, hold.h.Allocation.Addrs) {
		// The owner came back asking for something its hold cannot give:
		// end the hold in the same change, so its addresses do not leak.
		b.endHold(hold.h, nil)
	}
	b.put(allocRef, &a)
	for addr, c := range b.claims {
		b.put(ClaimRef(addr), c)
	}
	if q > 0 {
		b.makeRoomInQuota(&a, q)
		b.put(TenantGuardRef(a.Tenant), &ipam.TenantGuard{Tenant: a.Tenant})
	}
	if share != nil && b.takesNewUnder(*share) {
		b.put(ShareRef(share.tenant, share.key), &ipam.Share{Tenant: share.tenant, Key: share.key})
	}
	if share != nil {
		b.plan.share = share
		if b.plan.done == nil {
			b.plan.done = make(chan struct{})
		}
		x.inFlight[*share] = b.plan
	}
	return b.plan, nil
}

// makeRoomInQuota ends holds of a's tenant (other owners', earliest expiry
// first) while the addresses its allocations and holds keep would exceed
// its quota q once a is allocated: holds count against the quota, so that
// a tenant that churns owners cannot keep more addresses than its quota,
// and releasing an owner still makes room for another at once.
func (b *builder) makeRoomInQuota(a *ipam.Allocation, q uint64) {
	x := b.x
	keep := x.used[a.Tenant] + x.adding[a.Tenant] // a's addresses included
	held := x.heldAddrs[a.Tenant]
	own := a.Tenant + "/" + a.ID
	if h, ok := x.holds[own]; ok {
		held -= min(held, uint64(len(h.h.Allocation.Addrs))) // used or ended by this plan
	}
	if keep+held <= q {
		return
	}
	var holds []*ipam.Hold
	for id, e := range x.holds {
		if e.h.Allocation.Tenant != a.Tenant || id == own {
			continue
		}
		if slices.Contains(b.plan.Change.Deletes, RefOf(ipam.KindHold, a.Tenant, e.h.Allocation.ID)) {
			held -= min(held, uint64(len(e.h.Allocation.Addrs))) // already ended by this plan (reclaimed)
			continue
		}
		holds = append(holds, e.h)
	}
	slices.SortFunc(holds, func(p, r *ipam.Hold) int {
		if c := p.ExpireTime.Compare(r.ExpireTime); c != 0 {
			return c
		}
		return strings.Compare(p.Allocation.ID, r.Allocation.ID)
	})
	for _, h := range holds {
		if keep+held <= q {
			return
		}
		b.endHold(h, a.Addrs)
		held -= min(held, uint64(len(h.Allocation.Addrs)))
	}
}

// TenantGuardRef returns the ref of the guard of a tenant's quota.
func TenantGuardRef(tenant string) ipam.Ref {
	return ipam.Ref{Kind: ipam.KindTenantGuard, ID: tenant}
}

// ShareRef returns the ref of the guard of a tenant's sharing key.
func ShareRef(tenant, key string) ipam.Ref {
	return ipam.Ref{Kind: ipam.KindShare, ID: tenant + "/" + key}
}

// takesNewUnder reports whether the plan's claims include an address that
// the index does not already hold under the sharing key (a tenant's, or a
// global group's): such a plan must write the key's guard (see ipam.Share).
func (b *builder) takesNewUnder(k shareKey) bool {
	for addr := range b.claims {
		c, ok := b.x.claims[addr]
		if !ok {
			return true
		}
		if ck, ok := claimShareKey(c.c); !ok || ck != k {
			return true
		}
	}
	return false
}

// holdFits reports whether a hold's addresses answer a returning owner.
func (x *Index) holdFits(h *ipam.Hold, req *ipam.Allocation) bool {
	if !ipam.Satisfies(&h.Allocation, req) {
		return false
	}
	p, ok := x.pools[h.Allocation.Pool]
	if !ok || p.pool.Deleting || !p.pool.AllowsTenant(req.Tenant) {
		return false
	}
	for _, addr := range h.Allocation.Addrs {
		c, ok := x.claims[addr]
		if !ok || c.c.HeldFor != h.Allocation.ID || c.c.Tenant != req.Tenant {
			return false
		}
	}
	return true
}

func (b *builder) fromHold(a *ipam.Allocation, h *ipam.Hold) error {
	a.Pool = h.Allocation.Pool
	a.Addrs = slices.Clone(h.Allocation.Addrs)
	a.UID = h.Allocation.UID
	b.cond(ipam.Ref{Kind: ipam.KindPool, ID: a.Pool})
	for _, addr := range a.Addrs {
		c := *b.x.claims[addr].c
		c.HeldFor = ""
		c.SharingKey = a.SharingKey
		c.Holders = []ipam.Holder{{Allocation: a.ID, Ports: a.Ports}}
		b.claims[addr] = &c
	}
	b.del(RefOf(ipam.KindHold, a.Tenant, a.ID))
	b.plan.Before = &h.Allocation
	return nil
}

// endHold ends a hold, freeing its claims except keep and those the plan
// already writes.
func (b *builder) endHold(h *ipam.Hold, keep []netip.Addr) {
	ref := RefOf(ipam.KindHold, h.Allocation.Tenant, h.Allocation.ID)
	if slices.Contains(b.plan.Change.Deletes, ref) {
		return
	}
	b.del(ref)
	for _, addr := range h.Allocation.Addrs {
		if _, writes := b.claims[addr]; writes || slices.Contains(keep, addr) {
			continue
		}
		c, ok := b.x.claims[addr]
		switch {
		case ok && c.c.HeldFor == h.Allocation.ID && len(c.c.Holders) == 0:
			b.del(ClaimRef(addr))
		default:
			// Not held for h as the index sees it: commit only if that is
			// still so, so that a stale index cannot leave it behind.
			b.cond(ClaimRef(addr))
		}
	}
}

// requested plans an allocation of specific addresses.
func (b *builder) requested(a *ipam.Allocation) error {
	var pool *poolEntry
	seen := map[ipam.Family]bool{}
	for i, addr := range a.RequestedAddrs {
		f := ipam.FamilyOf(addr)
		if seen[f] {
			return ipam.Refuse(ipam.ErrNotAllowed, "requested_addresses[%d]: more than one %s address", i, f)
		}
		seen[f] = true
		p := b.x.poolOf(addr)
		if p == nil {
			return ipam.Refuse(ipam.ErrAddressNotInPool, "address %s is in no pool (or is excluded)", addr)
		}
		if pool != nil && pool != p {
			return ipam.Refuse(ipam.ErrNotAllowed, "requested addresses come from different pools %q and %q", pool.pool.Name, p.pool.Name)
		}
		pool = p
	}
	if a.RequestedPool != "" && a.RequestedPool != pool.pool.Name {
		return ipam.Refuse(ipam.ErrNotAllowed, "address %s is in pool %q, not the requested pool %q", a.RequestedAddrs[0], pool.pool.Name, a.RequestedPool)
	}
	if err := b.x.admits(pool, a); err != nil {
		return err
	}
	if a.FamilyPolicy == ipam.RequireDualStack && len(seen) < 2 {
		return ipam.Refuse(ipam.ErrNotAllowed, "require-dual-stack needs one requested address per family")
	}
	for _, addr := range a.RequestedAddrs {
		if c, ok := b.x.claims[addr]; ok {
			if !ipam.CanShare(c.c, a) {
				return b.x.inUse(addr, c.c, a.Tenant)
			}
			b.share(a, addr, c.c)
			continue
		}
		if other := b.x.reserved[addr]; other != nil {
			return &Pending{Done: other.done}
		}
		b.claim(pool, a, addr)
	}
	a.Pool = pool.pool.Name
	a.Addrs = slices.Clone(a.RequestedAddrs)
	b.cond(ipam.Ref{Kind: ipam.KindPool, ID: a.Pool})
	return nil
}

// admits checks that a pool may serve an allocation that names it (by name
// or by address): tenant, policy, and not being deleted. Naming a pool
// overrides auto_assign and priority, not whom its policy serves (as in
// MetalLB, which refuses to assign an address of a pool whose
// serviceAllocation does not match the Service).
func (x *Index) admits(p *poolEntry, a *ipam.Allocation) error {
	if p.pool.Deleting {
		return ipam.Refuse(ipam.ErrNotAllowed, "pool %q is being deleted", p.pool.Name)
	}
	if !p.pool.AllowsTenant(a.Tenant) {
		return ipam.Refuse(ipam.ErrNotAllowed, "tenant %q may not draw from pool %q", a.Tenant, p.pool.Name)
	}
	if !ipam.PolicyMatches(p.pool.Policy, a) {
		return ipam.Refuse(ipam.ErrNotAllowed, "the allocation policy of pool %q does not serve this owner (namespace, namespace labels or owner labels)", p.pool.Name)
	}
	return nil
}

func (b *builder) claim(p *poolEntry, a *ipam.Allocation, addr netip.Addr) {
	b.x.reserve(p, addr, b.plan)
	b.plan.reserved = append(b.plan.reserved, reservation{addr: addr, pool: p.pool.Name})
	c := &ipam.Claim{
		Addr: addr, Pool: p.pool.Name, Tenant: a.Tenant, SharingKey: a.SharingKey,
		Holders: []ipam.Holder{{Allocation: a.ID, Ports: a.Ports}},
	}
	if a.GlobalGroup != "" {
		c.Tenant, c.SharingKey, c.Group = "", "", a.GlobalGroup
		c.Holders[0].Tenant = a.Tenant
	}
	b.claims[addr] = c
}

func (b *builder) share(a *ipam.Allocation, addr netip.Addr, c *ipam.Claim) {
	n := *c
	h := ipam.Holder{Allocation: a.ID, Ports: a.Ports}
	if c.Group != "" {
		h.Tenant = a.Tenant
	}
	n.Holders = append(slices.Clone(c.Holders), h)
	b.claims[addr] = &n
}

// fromPools plans an allocation from the requested pool, or from the
// candidate pools in order: in each pool, every family combination in order;
// per family, a shareable address first, else the lowest free one.
func (b *builder) fromPools(a *ipam.Allocation) error {
	var candidates []*poolEntry
	if a.RequestedPool != "" {
		p, ok := b.x.pools[a.RequestedPool]
		if !ok {
			return ipam.Refuse(ipam.ErrNotFound, "pool %q not found", a.RequestedPool)
		}
		if err := b.x.admits(p, a); err != nil {
			return err
		}
		candidates = []*poolEntry{p}
	} else {
		for _, p := range ipam.CandidatePools(b.x.sortedPools(), a) {
			candidates = append(candidates, b.x.pools[p.Name])
		}
		if len(candidates) == 0 {
			return ipam.Refuse(ipam.ErrNotAllowed, "no pool serves tenant %q and this owner", a.Tenant)
		}
	}
	offered := false // some candidate has the families asked for, or is empty
	for _, p := range candidates {
		choices := ipam.FamilyChoices(a, p.hasFamily)
		if len(choices) > 0 || !p.hasFamily(ipam.IPv4) && !p.hasFamily(ipam.IPv6) {
			offered = true
		}
		for _, fams := range choices {
			addrs, ok := b.pick(p, a, fams)
			if !ok {
				continue
			}
			for _, addr := range addrs {
				if c, shared := b.x.claims[addr]; shared {
					b.share(a, addr, c.c)
				} else {
					b.claim(p, a, addr)
				}
			}
			a.Pool, a.Addrs = p.pool.Name, addrs
			b.cond(ipam.Ref{Kind: ipam.KindPool, ID: a.Pool})
			return nil
		}
	}
	// Nothing free: if plans in flight hold addresses of a candidate pool,
	// wait for them before reclaiming a hold or refusing.
	if d := b.x.reservedIn(candidates, a); d != nil {
		return &Pending{Done: d}
	}
	for _, p := range candidates {
		for _, fams := range ipam.FamilyChoices(a, p.hasFamily) {
			if b.reclaimHeld(p, a, fams) {
				b.plan.Reclaims = true
				return nil
			}
		}
	}
	if !offered {
		// Not a matter of waiting for addresses to be released.
		return ipam.Refuse(ipam.ErrNotAllowed, "no candidate pool has %s addresses", wantedFamilies(a))
	}
	return ipam.Refuse(ipam.ErrPoolExhausted, "no free address for owner %q in %d candidate pool(s)", a.Owner, len(candidates))
}

// wantedFamilies describes the families an allocation cannot do without.
func wantedFamilies(a *ipam.Allocation) string {
	switch {
	case a.FamilyPolicy == ipam.RequireDualStack:
		return "both IPv4 and IPv6"
	case len(a.Families) > 0:
		return a.Families[0].String()
	}
	return "any"
}

// pick chooses one address per family in pool p (a.Count() per family,
// family by family, each family's ascending), or reports none.
func (b *builder) pick(p *poolEntry, a *ipam.Allocation, fams []ipam.Family) ([]netip.Addr, bool) {
	out := make([]netip.Addr, 0, len(fams)*a.Count())
	if a.Count() > 1 {
		// Several addresses are the allocation's own: never shared.
		for _, f := range fams {
			addrs, ok := p.lowestN(f, a.Count())
			if !ok {
				return nil, false
			}
			out = append(out, addrs...)
		}
		return out, true
	}
	for _, f := range fams {
		if addr, ok := b.shareable(p, a, f); ok {
			out = append(out, addr)
			continue
		}
		addr, ok := p.lowest(f)
		if !ok {
			return nil, false
		}
		out = append(out, addr)
	}
	return out, true
}

// shareable returns the lowest address of family f in pool p that a may
// share under its sharing key.
func (b *builder) shareable(p *poolEntry, a *ipam.Allocation, f ipam.Family) (netip.Addr, bool) {
	k, ok := allocShareKey(a)
	if !ok {
		return netip.Addr{}, false
	}
	var best netip.Addr
	for addr := range b.x.sharing[k] {
		c := b.x.claims[addr]
		if c == nil || c.c.Pool != p.pool.Name || ipam.FamilyOf(addr) != f || !ipam.CanShare(c.c, a) {
			continue
		}
		if !best.IsValid() || addr.Less(best) {
			best = addr
		}
	}
	return best, best.IsValid()
}

// reservedIn returns the done channel of a plan in flight that reserved
// an address of a family a may take in one of the candidate pools, or nil.
// Cost: O(addresses reserved × candidates), both small.
func (x *Index) reservedIn(candidates []*poolEntry, a *ipam.Allocation) <-chan struct{} {
	for addr, other := range x.reserved {
		for _, p := range candidates {
			if !p.space.Contains(addr) {
				continue
			}
			for _, fams := range ipam.FamilyChoices(a, p.hasFamily) {
				if slices.Contains(fams, ipam.FamilyOf(addr)) {
					return other.done
				}
			}
		}
	}
	return nil
}

// reclaimHeld plans taking addresses kept for released owners when a pool
// has nothing else: the lowest held address per family (a.Count() of
// them), ending their holds.
//
// Cost: O(log n) in the pool's held addresses (see Index.heldIn), under
// the index's lock: no scan of the pool's claims.
func (b *builder) reclaimHeld(p *poolEntry, a *ipam.Allocation, fams []ipam.Family) bool {
	h := b.x.heldIn[p.pool.Name]
	if h == nil {
		return false
	}
	var picks []netip.Addr
	for _, f := range fams {
		best, ok := h.lowestN(f, a.Count())
		if !ok {
			return false
		}
		picks = append(picks, best...)
	}
	for _, addr := range picks {
		c := b.x.claims[addr].c
		if h, ok := b.x.holds[c.Tenant+"/"+c.HeldFor]; ok {
			b.endHold(h.h, picks)
		}
		n := *c
		n.Tenant, n.SharingKey, n.HeldFor = a.Tenant, a.SharingKey, ""
		n.Holders = []ipam.Holder{{Allocation: a.ID, Ports: a.Ports}}
		b.claims[addr] = &n
	}
	a.Pool, a.Addrs = p.pool.Name, picks
	b.cond(ipam.Ref{Kind: ipam.KindPool, ID: a.Pool})
	return true
}

func (x *Index) unreserveLocked(p *Plan) {
	for _, r := range p.reserved {
		delete(x.reserved, r.addr)
		if _, claimed := x.claims[r.addr]; claimed {
			continue
		}
		if e, ok := x.pools[r.pool]; ok {
			e.give(r.addr)
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

// inUse is the refusal of an address that claim c keeps from a request of
// tenant: held by another owner, or kept for a released one (a hold),
// naming that owner and when its hold ends if it is the tenant's own.
func (x *Index) inUse(addr netip.Addr, c *ipam.Claim, tenant string) error {
	if c.HeldFor == "" || len(c.Holders) > 0 {
		return ipam.Refuse(ipam.ErrAddressInUse, "address %s is in use", addr)
	}
	h, ok := x.holds[c.Tenant+"/"+c.HeldFor]
	if !ok {
		return ipam.Refuse(ipam.ErrAddressInUse, "address %s is kept for a released owner (a release hold)", addr)
	}
	end := h.h.ExpireTime.UTC().Format(time.RFC3339)
	if c.Tenant != tenant {
		return ipam.Refuse(ipam.ErrAddressInUse, "address %s is kept for a released owner of another tenant until %s (a release hold)", addr, end)
	}
	return ipam.Refuse(ipam.ErrAddressInUse, "address %s is kept for the released owner %q until %s (a release hold; releasing that owner ends it now)", addr, h.h.Allocation.Owner, end).
		With(ipam.DetailHeldFor, h.h.Allocation.Owner).With(ipam.DetailHoldExpireTime, end)
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
