package announce

import (
	"maps"
	"net/netip"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/planner"
)

// planned is a tenant's plans as last computed, from which the changes of
// its allocations and L2 owners are planned (planner.Replan) without
// planning everything again.
type planned struct {
	prep  *planner.Prepared
	plans map[string]*ipam.NodePlan
}

// update is one tenant's new plans.
type update struct {
	plans map[string]*ipam.NodePlan
	// deltas, when the plans were computed from a batch of changes, are
	// the nodes' changes, from prev, their previous plans; nil when the
	// plans were computed in full.
	deltas map[string]*planner.Delta
	prev   map[string]*ipam.NodePlan
	// in, when the plans were computed in full, is the input they were
	// computed from.
	in *planner.Input
	// owners, computed incrementally on the elected replica, are the L2
	// owner records to write.
	owners []ownerWrite
}

// fullBatch is how many changed allocations and owners, beyond a quarter
// of the tenant's allocations, make planning everything cheaper than
// planning each change.
const fullBatch = 64

// replan takes a tenant's batch of changes and plans them: from p, the
// tenant's last plans, when only allocations and L2 owners changed, else in
// full. lead: also decide the L2 owners to record. The batch is taken with
// the state it is planned from, under the state's lock: a batch is planned
// under it (milliseconds), a full plan from a copy of the tenant's input
// without it. Cost: for a batch, planner.Replan's; in full, the tenant's
// size.
//
// full, when not nil, is called with the input before a full plan is
// computed from it (the elected replica records the L2 owners meanwhile).
func (s *State) replan(tenant string, p *planned, lead bool, full func(*planner.Input)) (*planned, update) {
	s.mu.Lock()
	t := s.tenant(tenant)
	b := t.batch
	t.batch = batch{}
	if p == nil || b.full || len(b.allocs)+len(b.owners) > fullBatch+len(t.allocs)/4 {
		in := s.input(tenant)
		s.mu.Unlock()
		if full != nil {
			full(in)
		}
		p = &planned{prep: planner.Prepare(in), plans: planner.Plans(in, in.L2Owners)}
		return p, update{plans: p.plans, in: in}
	}
	defer s.mu.Unlock()
	ch := planner.Change{Owners: b.owners}
	touched := make([]netip.Addr, 0, len(b.owners))
	for addr := range b.owners {
		touched = append(touched, addr)
	}
	for id, before := range b.allocs {
		for _, a := range []*ipam.Allocation{before, t.allocs[id]} {
			if a != nil {
				ch.Allocations = append(ch.Allocations, a)
				touched = append(touched, a.Addrs...)
			}
		}
	}
	allocs := planner.Allocations{
		All:     maps.Values(t.allocs),
		Holding: t.holding,
	}
	u := update{deltas: p.prep.Replan(p.plans, allocs, ch, func(addr netip.Addr) string { return t.owners[addr] })}
	u.prev = make(map[string]*ipam.NodePlan, len(u.deltas))
	for name := range u.deltas {
		u.prev[name] = p.plans[name]
	}
	planner.ApplyAll(p.plans, u.deltas)
	u.plans = p.plans
	if lead && len(touched) > 0 {
		want := p.prep.Owners(allocs, touched, func(addr netip.Addr) (string, bool) {
			o, ok := t.owners[addr]
			return o, ok
		})
		u.owners = ownerChange(want, t.owners)
	}
	return p, u
}

// ownerChange returns the writes that record the owners in want ("": no
// owner) where they differ from the recorded ones.
func ownerChange(want, recorded map[netip.Addr]string) []ownerWrite {
	var writes []ownerWrite
	for addr, node := range want {
		cur, ok := recorded[addr]
		if ok && cur == node || !ok && node == "" {
			continue
		}
		writes = append(writes, ownerWrite{addr, node, cur})
	}
	return writes
}

// dropBatch forgets a tenant's batch: its plans are not kept (no session
// and nothing to record), so the next ones are computed in full.
func (s *State) dropBatch(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tenants[tenant]; t != nil {
		t.batch = batch{full: true}
	}
}
