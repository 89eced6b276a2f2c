package assign

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Allocate decides an allocation for req (its Tenant, Owner and request
// fields set; Allocate sets its ID). The result either names the owner's
// existing allocation or carries the change that creates a new one. The
// order of the rules: the owner's allocation if it has one; else a global
// group's addresses, the owner's own hold, the requested addresses, or the
// candidate pools; then the tenant's quota.
func Allocate(st State, req *ipam.Allocation, now time.Time) (*Decision, error) {
	req.ID = ipam.AllocationID(req.Owner)
	id := req.Tenant + "/" + req.ID
	if cur, _, ok := st.Allocation(id); ok {
		if cur.Owner != req.Owner {
			return nil, ipam.Refuse(ipam.ErrOwnerConflict, "owner %q collides with owner %q", req.Owner, cur.Owner)
		}
		if Satisfies(cur, req) {
			return &Decision{Existing: cur}, nil
		}
		return nil, ipam.Refuse(ipam.ErrOwnerConflict, "owner %q already holds %v from pool %q; release it first", req.Owner, cur.Addrs, cur.Pool)
	}
	var share *ShareKey
	if k, ok := allocShareKey(req); ok {
		share = &k
		if done, ok := st.InFlight(k); ok {
			return nil, &Pending{Done: done}
		}
	}
	b := newBuilder(st, &Decision{})
	a := *req
	a.Addrs, a.Pool = nil, ""
	a.CreateTime, a.UpdateTime = now, now
	if a.TTL > 0 {
		a.ExpireTime = now.Add(a.TTL)
	}
	b.d.Alloc = &a
	allocRef := ipam.RefOf(ipam.KindAllocation, a.Tenant, a.ID)
	b.cond(allocRef) // must not exist: the state has no revision for it
	// The owner's hold, as the state knows it (absent: must not exist), so
	// that a view that has not seen a release with a hold yet learns of it
	// from the conflict instead of handing out a new address while the
	// held one leaks until the hold ends.
	b.cond(ipam.RefOf(ipam.KindHold, req.Tenant, req.ID))

	hold, hasHold := st.Hold(id)
	var err error
	switch {
	case req.GlobalGroup != "":
		err = b.joinGroup(&a)
	case hasHold && holdFits(st, hold, req):
		err = b.fromHold(&a, hold)
	case len(req.RequestedAddrs) > 0:
		err = b.requested(&a)
	default:
		err = b.fromPools(&a)
	}
	if err != nil {
		return nil, err
	}
	// Allocations being committed count too: without them, concurrent
	// requests would all pass against the same committed count.
	use := st.Tenant(a.Tenant)
	if q := use.Quota; q > 0 && use.Used+use.Adding+uint64(len(a.Addrs)) > q {
		return nil, ipam.Refuse(ipam.ErrQuotaExceeded, "tenant %q holds %d of its %d addresses (%d more being allocated); %d more would exceed its quota",
			a.Tenant, use.Used, q, use.Adding, len(a.Addrs))
	}
	b.d.Adds = uint64(len(a.Addrs))
	if hasHold && a.Addrs != nil && !slices.Equal(a.Addrs, hold.Allocation.Addrs) {
		// The owner came back asking for something its hold cannot give:
		// end the hold in the same change, so its addresses do not leak.
		b.endHold(hold, nil)
	}
	b.put(allocRef, &a)
	for addr, c := range b.claims {
		b.put(ipam.ClaimRef(addr), c)
	}
	if use.Quota > 0 {
		b.makeRoomInQuota(&a, use)
		b.put(ipam.TenantGuardRef(a.Tenant), &ipam.TenantGuard{Tenant: a.Tenant})
	}
	if share != nil && b.takesNewUnder(*share) {
		b.put(ipam.ShareRef(share.Tenant, share.Key), &ipam.Share{Tenant: share.Tenant, Key: share.Key})
	}
	b.d.Share = share
	return b.d, nil
}

// makeRoomInQuota ends holds of a's tenant (other owners', earliest expiry
// first) while the addresses its allocations and holds keep would exceed
// its quota once a is allocated: holds count against the quota, so that a
// tenant that churns owners cannot keep more addresses than its quota, and
// releasing an owner still makes room for another at once.
func (b *builder) makeRoomInQuota(a *ipam.Allocation, use TenantUse) {
	q := use.Quota
	keep := use.Used + use.Adding + b.d.Adds // a's addresses included
	held := use.Held
	if h, ok := b.st.Hold(a.Tenant + "/" + a.ID); ok {
		held -= min(held, uint64(len(h.Allocation.Addrs))) // used or ended by this decision
	}
	if keep+held <= q {
		return
	}
	var holds []*ipam.Hold
	for _, h := range b.st.HoldsOf(a.Tenant) {
		if h.Allocation.ID == a.ID {
			continue
		}
		if slices.Contains(b.d.Change.Deletes, ipam.RefOf(ipam.KindHold, a.Tenant, h.Allocation.ID)) {
			held -= min(held, uint64(len(h.Allocation.Addrs))) // already ended by this decision (reclaimed)
			continue
		}
		holds = append(holds, h)
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

// takesNewUnder reports whether the decision's claims include an address
// that the state does not already hold under the sharing key (a tenant's,
// or a global group's): such a decision must write the key's guard (see
// ipam.Share).
func (b *builder) takesNewUnder(k ShareKey) bool {
	for addr := range b.claims {
		c, ok := b.st.Claim(addr)
		if !ok {
			return true
		}
		if ck, ok := ClaimShareKey(c); !ok || ck != k {
			return true
		}
	}
	return false
}

// holdFits reports whether a hold's addresses answer a returning owner.
func holdFits(st State, h *ipam.Hold, req *ipam.Allocation) bool {
	if !Satisfies(&h.Allocation, req) {
		return false
	}
	p, ok := st.Pool(h.Allocation.Pool)
	if !ok || p.Spec().Deleting || !p.Spec().AllowsTenant(req.Tenant) {
		return false
	}
	for _, addr := range h.Allocation.Addrs {
		c, ok := st.Claim(addr)
		if !ok || c.HeldFor != h.Allocation.ID || c.Tenant != req.Tenant {
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
		cur, _ := b.st.Claim(addr) // holdFits checked it is there
		c := *cur
		c.HeldFor = ""
		c.SharingKey = a.SharingKey
		c.Holders = []ipam.Holder{{Allocation: a.ID, Ports: a.Ports}}
		b.claims[addr] = &c
	}
	b.del(ipam.RefOf(ipam.KindHold, a.Tenant, a.ID))
	b.d.Before = &h.Allocation
	return nil
}

// endHold ends a hold, freeing its claims except keep and those the
// decision already writes.
func (b *builder) endHold(h *ipam.Hold, keep []netip.Addr) {
	ref := ipam.RefOf(ipam.KindHold, h.Allocation.Tenant, h.Allocation.ID)
	if slices.Contains(b.d.Change.Deletes, ref) {
		return
	}
	b.del(ref)
	for _, addr := range h.Allocation.Addrs {
		if _, writes := b.claims[addr]; writes || slices.Contains(keep, addr) {
			continue
		}
		c, ok := b.st.Claim(addr)
		switch {
		case ok && c.HeldFor == h.Allocation.ID && len(c.Holders) == 0:
			b.del(ipam.ClaimRef(addr))
		default:
			// Not held for h as the state shows it: commit only if that
			// is still so, so that a stale view cannot leave it behind.
			b.cond(ipam.ClaimRef(addr))
		}
	}
}

// requested decides an allocation of specific addresses.
func (b *builder) requested(a *ipam.Allocation) error {
	var pool Pool
	seen := map[ipam.Family]bool{}
	for i, addr := range a.RequestedAddrs {
		f := ipam.FamilyOf(addr)
		if seen[f] {
			return ipam.Refuse(ipam.ErrNotAllowed, "requested_addresses[%d]: more than one %s address", i, f)
		}
		seen[f] = true
		p, ok := b.st.PoolOf(addr)
		if !ok {
			return ipam.Refuse(ipam.ErrAddressNotInPool, "address %s is in no pool (or is excluded)", addr)
		}
		if pool != nil && pool.Spec().Name != p.Spec().Name {
			return ipam.Refuse(ipam.ErrNotAllowed, "requested addresses come from different pools %q and %q", pool.Spec().Name, p.Spec().Name)
		}
		pool = p
	}
	name := pool.Spec().Name
	if a.RequestedPool != "" && a.RequestedPool != name {
		return ipam.Refuse(ipam.ErrNotAllowed, "address %s is in pool %q, not the requested pool %q", a.RequestedAddrs[0], name, a.RequestedPool)
	}
	if err := admits(pool.Spec(), a); err != nil {
		return err
	}
	if a.FamilyPolicy == ipam.RequireDualStack && len(seen) < 2 {
		return ipam.Refuse(ipam.ErrNotAllowed, "require-dual-stack needs one requested address per family")
	}
	for _, addr := range a.RequestedAddrs {
		if c, ok := b.st.Claim(addr); ok {
			if !CanShare(c, a) {
				return inUse(b.st, addr, c, a.Tenant)
			}
			b.share(a, addr, c)
			continue
		}
		if done, ok := b.st.Reserved(addr); ok {
			return &Pending{Done: done}
		}
		b.claim(name, a, addr)
	}
	a.Pool = name
	a.Addrs = slices.Clone(a.RequestedAddrs)
	b.cond(ipam.Ref{Kind: ipam.KindPool, ID: a.Pool})
	return nil
}

// admits checks that a pool may serve an allocation that names it (by name
// or by address): tenant, policy, and not being deleted. Naming a pool
// overrides auto_assign and priority, not whom its policy serves (as in
// MetalLB, which refuses to assign an address of a pool whose
// serviceAllocation does not match the Service).
func admits(p *ipam.Pool, a *ipam.Allocation) error {
	if p.Deleting {
		return ipam.Refuse(ipam.ErrNotAllowed, "pool %q is being deleted", p.Name)
	}
	if !p.AllowsTenant(a.Tenant) {
		return ipam.Refuse(ipam.ErrNotAllowed, "tenant %q may not draw from pool %q", a.Tenant, p.Name)
	}
	if !PolicyMatches(p.Policy, a) {
		return ipam.Refuse(ipam.ErrNotAllowed, "the allocation policy of pool %q does not serve this owner (namespace, namespace labels or owner labels)", p.Name)
	}
	return nil
}

// claim takes a free address of pool for a.
func (b *builder) claim(pool string, a *ipam.Allocation, addr netip.Addr) {
	b.d.Takes = append(b.d.Takes, Take{Addr: addr, Pool: pool})
	c := &ipam.Claim{
		Addr: addr, Pool: pool, Tenant: a.Tenant, SharingKey: a.SharingKey,
		Holders: []ipam.Holder{{Allocation: a.ID, Ports: a.Ports}},
	}
	if a.GlobalGroup != "" {
		c.Tenant, c.SharingKey, c.Group = "", "", a.GlobalGroup
		c.Holders[0].Tenant = a.Tenant
	}
	b.claims[addr] = c
}

// share adds a to the holders of a claimed address.
func (b *builder) share(a *ipam.Allocation, addr netip.Addr, c *ipam.Claim) {
	n := *c
	h := ipam.Holder{Allocation: a.ID, Ports: a.Ports}
	if c.Group != "" {
		h.Tenant = a.Tenant
	}
	n.Holders = append(slices.Clone(c.Holders), h)
	b.claims[addr] = &n
}

// inUse is the refusal of an address that claim c keeps from a request of
// tenant: held by another owner, or kept for a released one (a hold),
// naming that owner and when its hold ends if it is the tenant's own.
func inUse(st State, addr netip.Addr, c *ipam.Claim, tenant string) error {
	if c.HeldFor == "" || len(c.Holders) > 0 {
		return ipam.Refuse(ipam.ErrAddressInUse, "address %s is in use", addr)
	}
	h, ok := st.Hold(c.Tenant + "/" + c.HeldFor)
	if !ok {
		return ipam.Refuse(ipam.ErrAddressInUse, "address %s is kept for a released owner (a release hold)", addr)
	}
	end := h.ExpireTime.UTC().Format(time.RFC3339)
	if c.Tenant != tenant {
		return ipam.Refuse(ipam.ErrAddressInUse, "address %s is kept for a released owner of another tenant until %s (a release hold)", addr, end)
	}
	return ipam.Refuse(ipam.ErrAddressInUse, "address %s is kept for the released owner %q until %s (a release hold; releasing that owner ends it now)", addr, h.Allocation.Owner, end).
		With(ipam.DetailHeldFor, h.Allocation.Owner).With(ipam.DetailHoldExpireTime, end)
}
