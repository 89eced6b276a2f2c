package index

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/assign"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

type groupEntry struct {
	g   *ipam.GlobalGroup
	rev int64
}

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
	st := GroupState{Group: e.g, Rev: e.rev, GuardRev: x.liveRev(ipam.GroupShareRef(key))}
	seen := map[string]bool{}
	for addr := range x.sharing[assign.GroupShareKey(key)] {
		c, ok := x.claims[addr]
		if !ok {
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
