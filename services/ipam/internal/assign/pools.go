package assign

import (
	"net/netip"
	"slices"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// The search of the candidate pools for free (or shareable, or held)
// addresses.

// fromPools decides an allocation from the requested pool, or from the
// candidate pools in order: in each pool, every family combination in
// order; per family, a shareable address first, else the lowest free one.
func (b *builder) fromPools(a *ipam.Allocation) error {
	var candidates []Pool
	if a.RequestedPool != "" {
		p, ok := b.st.Pool(a.RequestedPool)
		if !ok {
			return ipam.Refuse(ipam.ErrNotFound, "pool %q not found", a.RequestedPool)
		}
		if err := admits(p.Spec(), a); err != nil {
			return err
		}
		candidates = []Pool{p}
	} else {
		for _, spec := range CandidatePools(b.st.Pools(), a) {
			p, _ := b.st.Pool(spec.Name)
			candidates = append(candidates, p)
		}
		if len(candidates) == 0 {
			return ipam.Refuse(ipam.ErrNotAllowed, "no pool serves tenant %q and this owner", a.Tenant)
		}
	}
	offered := false // some candidate has the families asked for, or is empty
	for _, p := range candidates {
		choices := FamilyChoices(a, p.HasFamily)
		if len(choices) > 0 || !p.HasFamily(ipam.IPv4) && !p.HasFamily(ipam.IPv6) {
			offered = true
		}
		if b.takeFirstChoice(p, a, choices) {
			return nil
		}
	}
	// Nothing free: if decisions in flight hold addresses of a candidate
	// pool, wait for them before reclaiming a hold or refusing.
	if d := reservedIn(b.st, candidates, a); d != nil {
		return &Pending{Done: d}
	}
	for _, p := range candidates {
		for _, fams := range FamilyChoices(a, p.HasFamily) {
			if b.reclaimHeld(p, a, fams) {
				b.d.Reclaims = true
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

// takeFirstChoice gives a the addresses of the first family combination
// of choices that pool p can serve, shared or free; false if none.
func (b *builder) takeFirstChoice(p Pool, a *ipam.Allocation, choices [][]ipam.Family) bool {
	for _, fams := range choices {
		addrs, ok := b.pick(p, a, fams)
		if !ok {
			continue
		}
		for _, addr := range addrs {
			if c, shared := b.st.Claim(addr); shared {
				b.share(a, addr, c)
			} else {
				b.claim(p.Spec().Name, a, addr)
			}
		}
		a.Pool, a.Addrs = p.Spec().Name, addrs
		b.cond(ipam.Ref{Kind: ipam.KindPool, ID: a.Pool})
		return true
	}
	return false
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
func (b *builder) pick(p Pool, a *ipam.Allocation, fams []ipam.Family) ([]netip.Addr, bool) {
	out := make([]netip.Addr, 0, len(fams)*a.Count())
	if a.Count() > 1 {
		// Several addresses are the allocation's own: never shared.
		for _, f := range fams {
			addrs, ok := p.LowestFreeN(f, a.Count())
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
		addr, ok := p.LowestFree(f)
		if !ok {
			return nil, false
		}
		out = append(out, addr)
	}
	return out, true
}

// shareable returns the lowest address of family f in pool p that a may
// share under its sharing key.
func (b *builder) shareable(p Pool, a *ipam.Allocation, f ipam.Family) (netip.Addr, bool) {
	k, ok := allocShareKey(a)
	if !ok {
		return netip.Addr{}, false
	}
	var best netip.Addr
	for addr := range b.st.SharedUnder(k) {
		c, ok := b.st.Claim(addr)
		if !ok || c.Pool != p.Spec().Name || ipam.FamilyOf(addr) != f || !CanShare(c, a) {
			continue
		}
		if !best.IsValid() || addr.Less(best) {
			best = addr
		}
	}
	return best, best.IsValid()
}

// reservedIn returns the done channel of a decision in flight that
// reserved an address of a family a may take in one of the candidate
// pools, or nil. Cost: O(addresses reserved × candidates), both small.
func reservedIn(st State, candidates []Pool, a *ipam.Allocation) <-chan struct{} {
	for addr, done := range st.Reservations() {
		for _, p := range candidates {
			if !p.Contains(addr) {
				continue
			}
			for _, fams := range FamilyChoices(a, p.HasFamily) {
				if slices.Contains(fams, ipam.FamilyOf(addr)) {
					return done
				}
			}
		}
	}
	return nil
}

// reclaimHeld decides taking addresses kept for released owners when a
// pool has nothing else: the lowest held address per family (a.Count() of
// them), ending their holds.
//
// Cost: O(log n) in the pool's held addresses (see Pool.LowestHeldN): no
// scan of the pool's claims.
func (b *builder) reclaimHeld(p Pool, a *ipam.Allocation, fams []ipam.Family) bool {
	var picks []netip.Addr
	for _, f := range fams {
		best, ok := p.LowestHeldN(f, a.Count())
		if !ok {
			return false
		}
		picks = append(picks, best...)
	}
	for _, addr := range picks {
		c, _ := b.st.Claim(addr) // held addresses are claimed
		if h, ok := b.st.Hold(c.Tenant + "/" + c.HeldFor); ok {
			b.endHold(h, picks)
		}
		n := *c
		n.Tenant, n.SharingKey, n.HeldFor = a.Tenant, a.SharingKey, ""
		n.Holders = []ipam.Holder{{Allocation: a.ID, Ports: a.Ports}}
		b.claims[addr] = &n
	}
	a.Pool, a.Addrs = p.Spec().Name, picks
	b.cond(ipam.Ref{Kind: ipam.KindPool, ID: a.Pool})
	return true
}
