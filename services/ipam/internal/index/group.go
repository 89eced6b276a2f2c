package index

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// A global group's claims are indexed like a sharing key's, under the
// empty tenant (no tenant has an empty ID) and the group's "pool/group": its
// in-flight plans and its guard (ShareRef) work as a sharing key's do, across
// tenants.

type groupEntry struct {
	g   *ipam.GlobalGroup
	rev int64
}

// groupShareKey returns the key of a global group's addresses in sharing.
func groupShareKey(group string) shareKey { return shareKey{"", group} }

// claimShareKey returns the key a claim is indexed under in sharing: its
// global group's, or its tenant's sharing key; ok false if neither.
func claimShareKey(c *ipam.Claim) (shareKey, bool) {
	switch {
	case c.Group != "":
		return groupShareKey(c.Group), true
	case c.SharingKey != "":
		return shareKey{c.Tenant, c.SharingKey}, true
	}
	return shareKey{}, false
}

// allocShareKey returns the key under which an allocation shares
// addresses: its global group's or its sharing key's; ok false if neither.
func allocShareKey(a *ipam.Allocation) (shareKey, bool) {
	switch {
	case a.GlobalGroup != "":
		return groupShareKey(a.GlobalGroup), true
	case a.SharingKey != "":
		return shareKey{a.Tenant, a.SharingKey}, true
	}
	return shareKey{}, false
}

// GroupRef returns the ref of a global group by "pool/group".
func GroupRef(key string) ipam.Ref { return ipam.Ref{Kind: ipam.KindGlobalGroup, ID: key} }

// GroupShareRef returns the ref of the guard of a global group's addresses
// (see ipam.Share): every plan that takes a new address for the group
// writes it.
func GroupShareRef(key string) ipam.Ref { return ShareRef("", key) }

// GroupMember is one allocation in a global group.
type GroupMember struct {
	Tenant, ID, Owner string
	Backup            bool
}

// GroupState is what the index knows of a global group.
type GroupState struct {
	Group *ipam.GlobalGroup
	Rev   int64
	// Addrs are the group's addresses, in address order.
	Addrs []netip.Addr
	// Members are its allocations, by tenant then ID.
	Members []GroupMember
	// GuardRev is the revision of the group's guard the index holds (0:
	// none).
	GuardRev int64
}

// Group returns a global group by "pool/group" with its addresses and
// members, if the index has it.
func (x *Index) Group(key string) (GroupState, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.groups[key]
	if !ok {
		return GroupState{}, false
	}
	st := GroupState{Group: e.g, Rev: e.rev, GuardRev: x.liveRev(GroupShareRef(key))}
	seen := map[string]bool{}
	for addr := range x.sharing[groupShareKey(key)] {
		c := x.claims[addr]
		if c == nil {
			continue
		}
		st.Addrs = append(st.Addrs, addr)
		for _, h := range c.c.Holders {
			t := h.TenantIn(c.c)
			if seen[t+"/"+h.Allocation] {
				continue
			}
			seen[t+"/"+h.Allocation] = true
			m := GroupMember{Tenant: t, ID: h.Allocation}
			if a, ok := x.allocs[t+"/"+h.Allocation]; ok {
				m.Owner, m.Backup = a.a.Owner, a.a.GlobalBackup
			}
			st.Members = append(st.Members, m)
		}
	}
	slices.SortFunc(st.Addrs, netip.Addr.Compare)
	slices.SortFunc(st.Members, func(p, q GroupMember) int {
		if c := strings.Compare(p.Tenant, q.Tenant); c != 0 {
			return c
		}
		return strings.Compare(p.ID, q.ID)
	})
	return st, true
}

// joinGroup plans an allocation that joins its global group: the group's
// address of each family it wants, or a free one of the group's pool for a
// family the group has none of yet.
func (b *builder) joinGroup(a *ipam.Allocation) error {
	x := b.x
	e, ok := x.groups[a.GlobalGroup]
	if !ok {
		return ipam.Refuse(ipam.ErrNotFound, "global group %s not found", GroupName(a.GlobalGroup))
	}
	g := e.g
	if !g.Grants(a.Tenant) {
		return ipam.Refuse(ipam.ErrNotAllowed, "tenant %q is not granted to join global group %s (an administrator adds it to the group's tenants)", a.Tenant, GroupName(g.Key()))
	}
	if a.RequestedPool != "" && a.RequestedPool != g.Pool {
		return ipam.Refuse(ipam.ErrNotAllowed, "global group %s draws from pool %q, not the requested pool %q", GroupName(g.Key()), g.Pool, a.RequestedPool)
	}
	p, ok := x.pools[g.Pool]
	if !ok {
		return ipam.Refuse(ipam.ErrNotFound, "pool %q of global group %s not found", g.Pool, GroupName(g.Key()))
	}
	if err := x.admits(p, a); err != nil {
		return err
	}
	for addr := range x.sharing[groupShareKey(g.Key())] {
		c := x.claims[addr].c
		for _, h := range c.Holders {
			if h.TenantIn(c) == a.Tenant && h.Allocation != a.ID {
				other := h.Allocation
				if o, ok := x.allocs[a.Tenant+"/"+h.Allocation]; ok {
					other = o.a.Owner
				}
				return ipam.Refuse(ipam.ErrNotAllowed, "tenant %q already has a member of global group %s (%s): one per tenant", a.Tenant, GroupName(g.Key()), other)
			}
		}
	}
	b.cond(GroupRef(g.Key())) // the group must not be deleted meanwhile
	choices := ipam.FamilyChoices(a, p.hasFamily)
	for _, fams := range choices {
		addrs, ok := b.pick(p, a, fams)
		if !ok {
			continue
		}
		for _, addr := range addrs {
			if c, shared := x.claims[addr]; shared {
				b.share(a, addr, c.c)
			} else {
				b.claim(p, a, addr)
			}
		}
		a.Pool, a.Addrs = p.pool.Name, addrs
		b.cond(ipam.Ref{Kind: ipam.KindPool, ID: a.Pool})
		return nil
	}
	if d := x.reservedIn([]*poolEntry{p}, a); d != nil {
		return &Pending{Done: d}
	}
	if len(choices) == 0 {
		return ipam.Refuse(ipam.ErrNotAllowed, "pool %q of global group %s has no %s addresses", g.Pool, GroupName(g.Key()), wantedFamilies(a))
	}
	return ipam.Refuse(ipam.ErrPoolExhausted, "no free address in pool %q for global group %s", g.Pool, GroupName(g.Key()))
}

// GroupName returns the resource name of a global group "pool/group".
func GroupName(key string) string {
	pool, group, _ := strings.Cut(key, "/")
	return "pools/" + pool + "/globalGroups/" + group
}
