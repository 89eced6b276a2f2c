package assign

import (
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// joinGroup decides an allocation that joins its global group: the group's
// address of each family it wants, or a free one of the group's pool for a
// family the group has none of yet. A global group's claims are shared
// under GroupShareKey: its decisions in flight and its guard
// (ipam.GroupShareRef) work as a sharing key's do, across tenants.
func (b *builder) joinGroup(a *ipam.Allocation) error {
	g, ok := b.st.Group(a.GlobalGroup)
	if !ok {
		return ipam.Refuse(ipam.ErrNotFound, "global group %s not found", ipam.GroupName(a.GlobalGroup))
	}
	if !g.Grants(a.Tenant) {
		return ipam.Refuse(ipam.ErrNotAllowed, "tenant %q is not granted to join global group %s (an administrator adds it to the group's tenants)", a.Tenant, ipam.GroupName(g.Key()))
	}
	if a.RequestedPool != "" && a.RequestedPool != g.Pool {
		return ipam.Refuse(ipam.ErrNotAllowed, "global group %s draws from pool %q, not the requested pool %q", ipam.GroupName(g.Key()), g.Pool, a.RequestedPool)
	}
	p, ok := b.st.Pool(g.Pool)
	if !ok {
		return ipam.Refuse(ipam.ErrNotFound, "pool %q of global group %s not found", g.Pool, ipam.GroupName(g.Key()))
	}
	if err := admits(p.Spec(), a); err != nil {
		return err
	}
	for addr := range b.st.SharedUnder(GroupShareKey(g.Key())) {
		c, _ := b.st.Claim(addr)
		for _, h := range c.Holders {
			if h.TenantIn(c) == a.Tenant && h.Allocation != a.ID {
				other := h.Allocation
				if o, _, ok := b.st.Allocation(a.Tenant + "/" + h.Allocation); ok {
					other = o.Owner
				}
				return ipam.Refuse(ipam.ErrNotAllowed, "tenant %q already has a member of global group %s (%s): one per tenant", a.Tenant, ipam.GroupName(g.Key()), other)
			}
		}
	}
	b.cond(ipam.GroupRef(g.Key())) // the group must not be deleted meanwhile
	choices := FamilyChoices(a, p.HasFamily)
	if b.takeFirstChoice(p, a, choices) {
		return nil
	}
	if d := reservedIn(b.st, []Pool{p}, a); d != nil {
		return &Pending{Done: d}
	}
	if len(choices) == 0 {
		return ipam.Refuse(ipam.ErrNotAllowed, "pool %q of global group %s has no %s addresses", g.Pool, ipam.GroupName(g.Key()), wantedFamilies(a))
	}
	return ipam.Refuse(ipam.ErrPoolExhausted, "no free address in pool %q for global group %s", g.Pool, ipam.GroupName(g.Key()))
}
