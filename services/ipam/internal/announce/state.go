// Package announce is the IPAM's side of announcement: it keeps the
// announcement config, the live nodes and the L2 owners in memory (fed by the
// replica's follower), computes each node's plan with the planner (incrementally for
// changes of allocations and L2 owners, see Hub.plan), streams plan
// changes to the subscribed announcers, and — on the one replica elected for
// it — records which node answers for each L2 address. It imports no
// storage and no transport: the store and the gRPC layer reach it through
// small interfaces.
package announce

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/planner"
)

// State is the announcement-relevant part of the IPAM's state, by tenant.
// It is a follower sink. Besides the state, it keeps what changed in each
// tenant since the tenant's plans were last computed (a batch), so that a
// change of allocations or L2 owners is planned from the changes alone.
type State struct {
	mu      sync.Mutex
	pools   map[string]*ipam.Pool
	tenants map[string]*tenantState
	// answered are the L2 addresses some node of the tenant has reported
	// answering for, by "tenant/addr", kept after the node is gone (until
	// an allocation holding the address is deleted): a node given one
	// need not probe it for conflicts (Known).
	answered map[string]bool
	dirty    map[string]bool // tenants changed since Take
	all      bool            // every tenant changed (pools changed)
	notify   chan struct{}
	// rev is the revision the state has applied the changes up to.
	rev int64
}

// tenantState is one tenant's part of the state, by full ID
// ("tenant/id"), and its batch.
type tenantState struct {
	allocs map[string]*ipam.Allocation
	// byAddr indexes allocs by address: the first allocation holding each
	// address; more holds the others of an address several share (see
	// holding). A map of single pointers, not of slices, costs about half:
	// almost every address has one holder.
	byAddr map[netip.Addr]*ipam.Allocation
	more   map[netip.Addr][]*ipam.Allocation
	l2     map[string]*ipam.L2Advertisement
	bgp    map[string]*ipam.BGPAdvertisement
	peers  map[string]*ipam.BGPPeer
	bfd    map[string]*ipam.BFDProfile
	comms  map[string]*ipam.Community
	nodes  map[string]*ipam.Node // live registrations
	drains map[string]*ipam.Drain
	// cnodes are what the tenant's cluster says about its nodes, merged
	// into the live registrations in Input.
	cnodes map[string]*ipam.ClusterNode
	// owners are the recorded L2 owners: from the owner sets (sets, and
	// inSet, the set holding each address), else from the per-address
	// records of earlier versions (legacy). See owners.go.
	owners map[netip.Addr]string
	sets   map[setKey]ownerSet
	inSet  map[netip.Addr]setKey
	legacy map[netip.Addr]ownerEntry
	batch  batch
}

// batch is what changed in a tenant since its plans were last computed.
type batch struct {
	// full: something other than allocations and L2 owners changed (nodes,
	// configuration, pools), or a reload: plan everything.
	full bool
	// allocs are the changed allocations' versions when the plans were
	// computed (nil: none), by full ID.
	allocs map[string]*ipam.Allocation
	// owners are the changed L2 owners' nodes when the plans were computed
	// ("": none).
	owners map[netip.Addr]string
}

func newTenantState() *tenantState {
	return &tenantState{
		allocs: map[string]*ipam.Allocation{},
		byAddr: map[netip.Addr]*ipam.Allocation{},
		more:   map[netip.Addr][]*ipam.Allocation{},
		l2:     map[string]*ipam.L2Advertisement{},
		bgp:    map[string]*ipam.BGPAdvertisement{},
		peers:  map[string]*ipam.BGPPeer{},
		bfd:    map[string]*ipam.BFDProfile{},
		comms:  map[string]*ipam.Community{},
		nodes:  map[string]*ipam.Node{},
		drains: map[string]*ipam.Drain{},
		cnodes: map[string]*ipam.ClusterNode{},
		owners: map[netip.Addr]string{},
		sets:   map[setKey]ownerSet{},
		inSet:  map[netip.Addr]setKey{},
		legacy: map[netip.Addr]ownerEntry{},
		batch:  batch{full: true},
	}
}

// NewState returns an empty state.
func NewState() *State {
	s := &State{notify: make(chan struct{}, 1), answered: map[string]bool{}}
	s.reset()
	return s
}

func (s *State) reset() {
	s.pools = map[string]*ipam.Pool{}
	s.tenants = map[string]*tenantState{}
	s.dirty = map[string]bool{}
}

// tenant returns a tenant's state, creating it.
func (s *State) tenant(name string) *tenantState {
	t := s.tenants[name]
	if t == nil {
		t = newTenantState()
		s.tenants[name] = t
	}
	return t
}

// Changed is signalled when some tenant's inputs changed.
func (s *State) Changed() <-chan struct{} { return s.notify }

// Replace implements the replica's Sink (replica/follow.go).
func (s *State) Replace(events []ipam.Event, rev int64) {
	s.mu.Lock()
	s.reset()
	s.rev = rev
	for _, ev := range events {
		s.apply(ev)
	}
	s.pruneAnswered()
	s.all = true
	s.mu.Unlock()
	s.signal()
}

// Apply implements the replica's Sink (replica/follow.go). Events come from the watch in commit
// order, so the newest always wins.
func (s *State) Apply(events []ipam.Event, rev int64) {
	s.mu.Lock()
	s.rev = max(s.rev, rev)
	if len(events) == 0 {
		s.mu.Unlock()
		return
	}
	changed := false
	for _, ev := range events {
		changed = s.apply(ev) || changed
	}
	s.mu.Unlock()
	if changed {
		s.signal()
	}
}

// pruneAnswered forgets the answered addresses no allocation holds, after
// a reload in which their deletions may have been missed.
func (s *State) pruneAnswered() {
	if len(s.answered) == 0 {
		return // nothing to prune: a replica's first load (a million allocations cost 2 s here)
	}
	held := map[string]bool{}
	for name, t := range s.tenants {
		for addr := range t.byAddr {
			held[name+"/"+addr.String()] = true
		}
	}
	for k := range s.answered {
		if !held[k] {
			delete(s.answered, k)
		}
	}
}

func (s *State) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func tenantOf(id string) string {
	t, _, _ := strings.Cut(id, "/")
	return t
}

// put stores v under id in m, or deletes id when v is nil.
func put[T any](m map[string]*T, id string, v any) {
	if t, ok := v.(*T); ok {
		m[id] = t
		return
	}
	delete(m, id)
}

func (s *State) apply(ev ipam.Event) bool {
	id := ev.Ref.ID
	v := ev.Value
	if ev.Deleted {
		v = nil
	}
	name := tenantOf(id)
	switch ev.Ref.Kind {
	case ipam.KindPool:
		put(s.pools, id, v)
		s.all = true
		for _, t := range s.tenants {
			t.batch.full = true // before Take: a tenant planned meanwhile sees the pool
		}
		return true
	case ipam.KindAllocation:
		s.applyAllocation(name, id, v)
	case ipam.KindL2Advertisement:
		put(s.tenant(name).l2, id, v)
	case ipam.KindBGPAdvertisement:
		put(s.tenant(name).bgp, id, v)
	case ipam.KindBGPPeer:
		put(s.tenant(name).peers, id, v)
	case ipam.KindBFDProfile:
		put(s.tenant(name).bfd, id, v)
	case ipam.KindCommunity:
		put(s.tenant(name).comms, id, v)
	case ipam.KindNode:
		if !s.applyNode(name, id, v) {
			return false
		}
	case ipam.KindDrain:
		put(s.tenant(name).drains, id, v)
	case ipam.KindClusterNode:
		put(s.tenant(name).cnodes, id, v)
	case ipam.KindL2Owner:
		s.applyOwner(name, id, v, ev.Rev)
	case ipam.KindL2OwnerSet:
		s.applyOwnerSet(id, v, ev.Rev)
	default:
		return false
	}
	if k := ev.Ref.Kind; k != ipam.KindAllocation && k != ipam.KindL2Owner && k != ipam.KindL2OwnerSet {
		s.tenant(name).batch.full = true
	}
	s.dirty[name] = true
	return true
}

// applyAllocation stores an allocation (nil: deleted), indexes its
// addresses and adds it to the tenant's batch.
func (s *State) applyAllocation(name, id string, v any) {
	t := s.tenant(name)
	old := t.allocs[id]
	if old != nil && v == nil {
		for _, a := range old.Addrs {
			delete(s.answered, name+"/"+a.String())
		}
	}
	// A full batch plans everything: the versions it would keep (one map
	// entry per allocation after a load) are never read.
	if !t.batch.full {
		if t.batch.allocs == nil {
			t.batch.allocs = map[string]*ipam.Allocation{}
		}
		if _, ok := t.batch.allocs[id]; !ok {
			t.batch.allocs[id] = old
		}
	}
	if old != nil {
		for _, addr := range old.Addrs {
			t.dropHolder(addr, old)
		}
	}
	put(t.allocs, id, v)
	if a := t.allocs[id]; a != nil {
		for i, addr := range a.Addrs {
			if !slices.Contains(a.Addrs[:i], addr) {
				t.addHolder(addr, a)
			}
		}
	}
}

// addHolder records that a holds addr.
func (t *tenantState) addHolder(addr netip.Addr, a *ipam.Allocation) {
	if _, ok := t.byAddr[addr]; !ok {
		t.byAddr[addr] = a
		return
	}
	t.more[addr] = append(t.more[addr], a)
}

// dropHolder records that a no longer holds addr.
func (t *tenantState) dropHolder(addr netip.Addr, a *ipam.Allocation) {
	more := t.more[addr]
	switch {
	case t.byAddr[addr] != a:
		more = slices.DeleteFunc(more, func(h *ipam.Allocation) bool { return h == a })
	case len(more) == 0:
		delete(t.byAddr, addr)
		return
	default:
		t.byAddr[addr], more = more[0], more[1:]
	}
	if len(more) == 0 {
		delete(t.more, addr)
	} else {
		t.more[addr] = more
	}
}

// holding returns the allocations holding addr, in the order they came.
func (t *tenantState) holding(addr netip.Addr) []*ipam.Allocation {
	first, ok := t.byAddr[addr]
	if !ok {
		return nil
	}
	return append([]*ipam.Allocation{first}, t.more[addr]...)
}

// applyNode stores a node's registration (nil: gone) and reports whether
// anything planning reads changed: its presence, labels or interfaces,
// not what it reports announcing (which only feeds Known).
func (s *State) applyNode(name, id string, v any) bool {
	n, _ := v.(*ipam.Node)
	if n != nil {
		for _, a := range n.Announced {
			if !a.BGP {
				s.answered[name+"/"+a.Addr] = true
			}
		}
	}
	t := s.tenant(name)
	old := t.nodes[id]
	put(t.nodes, id, v)
	switch {
	case old == nil && n == nil:
		return false
	case old == nil || n == nil:
		return true
	}
	return !maps.Equal(old.Labels, n.Labels) || !slices.EqualFunc(old.Interfaces, n.Interfaces, sameInterface)
}

func sameInterface(a, b ipam.Interface) bool {
	return a.Name == b.Name && a.MAC == b.MAC && a.Up == b.Up && slices.Equal(a.Addrs, b.Addrs)
}

// Take returns the tenants whose inputs changed since the last call (all
// known tenants after a reload or a pool change) and forgets them.
func (s *State) Take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.all {
		for name, t := range s.tenants {
			if len(t.allocs) > 0 || len(t.nodes) > 0 {
				s.dirty[name] = true
			}
			t.batch.full = true
		}
		s.all = false
	}
	out := make([]string, 0, len(s.dirty))
	for t := range s.dirty {
		out = append(out, t)
	}
	clear(s.dirty)
	return out
}

// values returns the values of m.
func values[T any](m map[string]*T) []*T {
	return slices.Collect(maps.Values(m))
}

// Input returns the planner's input for one tenant.
func (s *State) Input(tenant string) *planner.Input {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.input(tenant)
}

// input is Input with s.mu held. Cost: the tenant's size.
func (s *State) input(tenant string) *planner.Input {
	t := s.tenants[tenant]
	if t == nil {
		t = newTenantState()
	}
	in := &planner.Input{
		Pools:       maps.Clone(s.pools),
		Allocations: values(t.allocs),
		L2:          values(t.l2),
		BGP:         values(t.bgp),
		Peers:       values(t.peers),
		BFD:         make(map[string]*ipam.BFDProfile, len(t.bfd)),
		Communities: values(t.comms),
		L2Owners:    make(map[netip.Addr]string, len(t.owners)),
	}
	if in.Pools == nil {
		in.Pools = map[string]*ipam.Pool{}
	}
	for _, b := range t.bfd {
		in.BFD[b.ID] = b
	}
	for _, n := range t.nodes {
		c := *n
		c.Live = true
		c.Draining = t.drains[tenant+"/"+n.Name] != nil
		var excluded bool
		c.Labels, excluded = n.Effective(t.cnodes[tenant+"/"+n.Name])
		// An excluded node announces nothing, as a drained one: its L2
		// addresses move to another node before it stops answering.
		c.Draining = c.Draining || excluded
		in.Nodes = append(in.Nodes, &c)
	}
	maps.Copy(in.L2Owners, t.owners)
	return in
}

// Node returns a live node's registration.
func (s *State) Node(tenant, name string) (*ipam.Node, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenants[tenant]
	if t == nil {
		return nil, false
	}
	n, ok := t.nodes[tenant+"/"+name]
	return n, ok
}

// Drained reports whether a node is drained.
func (s *State) Drained(tenant, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenants[tenant]
	return t != nil && t.drains[tenant+"/"+name] != nil
}

// markDirty marks a tenant changed.
func (s *State) markDirty(tenant string) {
	s.mu.Lock()
	s.dirty[tenant] = true
	s.mu.Unlock()
	s.signal()
}

// markFull marks a tenant changed in full: its plans are computed from
// scratch, and, on the elected replica, all its L2 owners.
func (s *State) markFull(tenant string) {
	s.mu.Lock()
	s.tenant(tenant).batch.full = true
	s.dirty[tenant] = true
	s.mu.Unlock()
	s.signal()
}

// markAll marks every tenant changed.
func (s *State) markAll() {
	s.mu.Lock()
	s.all = true
	s.mu.Unlock()
	s.signal()
}

// Announcement is one node reporting that it announces an address.
type Announcement struct {
	Node string
	// Addr is the address or prefix announced.
	Addr       string
	BGP        bool
	Interfaces []string
	Peers      []string
}

// AnnouncementsOf returns, for each of a tenant's addresses, the nodes that
// report announcing it (from their last status), sorted by node.
func (s *State) AnnouncementsOf(tenant string, addrs []string) []Announcement {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Announcement
	for _, n := range s.nodesOf(tenant) {
		for _, a := range n.Announced {
			for _, want := range addrs {
				if a.Addr == want || strings.HasPrefix(a.Addr, want+"/") {
					out = append(out, Announcement{Node: n.Name, Addr: a.Addr, BGP: a.BGP, Interfaces: a.Interfaces, Peers: a.Peers})
				}
			}
		}
	}
	slices.SortFunc(out, func(x, y Announcement) int { return strings.Compare(x.Node, y.Node) })
	return out
}

// Known reports whether Beacon was already answering for a tenant's L2
// address before node is given it: some node has reported answering for
// it, or its recorded owner is another node. Such an address moves between
// Beacon's own nodes, so the node answers at once rather than probing for
// another host using it.
func (s *State) Known(tenant, node string, addr netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := tenant + "/" + addr.String()
	if s.answered[k] {
		return true
	}
	t := s.tenants[tenant]
	if t == nil {
		return false
	}
	o, ok := t.owners[addr]
	return ok && o != node
}

// Conflict is a node reporting another host using one of its L2 addresses.
type Conflict struct {
	Node string
	ipam.AddrConflict
}

// ConflictsOf returns the conflicts a tenant's nodes report on the given
// addresses, sorted by address and node. Claims from the MAC of any of the
// tenant's nodes are left out: those are Beacon's own nodes handing an
// address over, not another host.
func (s *State) ConflictsOf(tenant string, addrs []string) []Conflict {
	s.mu.Lock()
	defer s.mu.Unlock()
	nodes := s.nodesOf(tenant)
	ours := map[string]bool{}
	for _, n := range nodes {
		for _, itf := range n.Interfaces {
			ours[strings.ToLower(itf.MAC)] = true
		}
	}
	var out []Conflict
	for _, n := range nodes {
		for _, c := range n.Conflicts {
			if ours[strings.ToLower(c.MAC)] || !slices.Contains(addrs, c.Addr) {
				continue
			}
			out = append(out, Conflict{Node: n.Name, AddrConflict: c})
		}
	}
	slices.SortFunc(out, func(x, y Conflict) int {
		if c := strings.Compare(x.Addr, y.Addr); c != 0 {
			return c
		}
		return strings.Compare(x.Node+"/"+x.Interface, y.Node+"/"+y.Interface)
	})
	return out
}

// Warnings returns the planner's warnings about a tenant's announcement
// config, by resource ("l2Advertisements/x", "bgpPeers/y", ...).
func (s *State) Warnings(tenant string) map[string][]planner.Warning {
	in := s.Input(tenant)
	out := map[string][]planner.Warning{}
	for _, w := range planner.Check(in) {
		out[w.Resource] = append(out[w.Resource], w)
	}
	return out
}

// needsOwners reports whether a tenant has L2 advertisements or recorded
// L2 owners: only then is there ownership to compute.
func (s *State) needsOwners(tenant string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenants[tenant]
	return t != nil && (len(t.l2) > 0 || len(t.owners) > 0)
}

// nodesOf returns a tenant's live registrations, with s.mu held.
func (s *State) nodesOf(tenant string) []*ipam.Node {
	t := s.tenants[tenant]
	if t == nil {
		return nil
	}
	return values(t.nodes)
}
