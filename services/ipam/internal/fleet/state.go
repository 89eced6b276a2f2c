// Package fleet is the IPAM's side of announcement: it keeps the
// announcement config, the live nodes and the L2 owners in memory (fed by the
// follower), computes each node's plan with the planner, streams plan
// changes to the subscribed announcers, and — on the one replica elected for
// it — records which node answers for each L2 address. It imports no
// storage and no transport: the store and the gRPC layer reach it through
// small interfaces.
package fleet

import (
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/planner"
)

// State is the announcement-relevant part of the IPAM's state, by tenant.
// It is a follower sink.
type State struct {
	mu     sync.Mutex
	pools  map[string]*ipam.Pool
	allocs map[string]*ipam.Allocation // "tenant/id"
	l2     map[string]*ipam.L2Advertisement
	bgp    map[string]*ipam.BGPAdvertisement
	peers  map[string]*ipam.BGPPeer
	bfd    map[string]*ipam.BFDProfile
	comms  map[string]*ipam.Community
	nodes  map[string]*ipam.Node // "tenant/node": live registrations
	drains map[string]*ipam.Drain
	// cnodes are what the tenants' clusters say about their nodes, by
	// "tenant/node", merged into the live registrations in Input.
	cnodes map[string]*ipam.ClusterNode
	owners map[string]ownerEntry // "tenant/addr"
	// answered are the L2 addresses some node of the tenant has reported
	// answering for, by "tenant/addr", kept after the node is gone (until
	// an allocation holding the address is deleted): a node given one
	// need not probe it for conflicts (Known).
	answered map[string]bool
	dirty    map[string]bool // tenants changed since Take
	all      bool            // every tenant changed (pools changed)
	notify   chan struct{}
}

type ownerEntry struct {
	node string
	rev  int64
}

// NewState returns an empty state.
func NewState() *State {
	s := &State{notify: make(chan struct{}, 1), answered: map[string]bool{}}
	s.reset()
	return s
}

func (s *State) reset() {
	s.pools = map[string]*ipam.Pool{}
	s.allocs = map[string]*ipam.Allocation{}
	s.l2 = map[string]*ipam.L2Advertisement{}
	s.bgp = map[string]*ipam.BGPAdvertisement{}
	s.peers = map[string]*ipam.BGPPeer{}
	s.bfd = map[string]*ipam.BFDProfile{}
	s.comms = map[string]*ipam.Community{}
	s.nodes = map[string]*ipam.Node{}
	s.drains = map[string]*ipam.Drain{}
	s.cnodes = map[string]*ipam.ClusterNode{}
	s.owners = map[string]ownerEntry{}
	s.dirty = map[string]bool{}
}

// Changed is signalled when some tenant's inputs changed.
func (s *State) Changed() <-chan struct{} { return s.notify }

// Replace implements follower.Sink.
func (s *State) Replace(events []ipam.Event, _ int64) {
	s.mu.Lock()
	s.reset()
	for _, ev := range events {
		s.apply(ev)
	}
	s.pruneAnswered()
	s.all = true
	s.mu.Unlock()
	s.signal()
}

// Apply implements follower.Sink. Events come from the watch in commit
// order, so the newest always wins.
func (s *State) Apply(events []ipam.Event, _ int64) {
	if len(events) == 0 {
		return
	}
	s.mu.Lock()
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
	for id, a := range s.allocs {
		for _, addr := range a.Addrs {
			held[tenantOf(id)+"/"+addr.String()] = true
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
	switch ev.Ref.Kind {
	case ipam.KindPool:
		put(s.pools, id, v)
		s.all = true
		return true
	case ipam.KindAllocation:
		if old := s.allocs[id]; old != nil && v == nil {
			for _, a := range old.Addrs {
				delete(s.answered, tenantOf(id)+"/"+a.String())
			}
		}
		put(s.allocs, id, v)
	case ipam.KindL2Advertisement:
		put(s.l2, id, v)
	case ipam.KindBGPAdvertisement:
		put(s.bgp, id, v)
	case ipam.KindBGPPeer:
		put(s.peers, id, v)
	case ipam.KindBFDProfile:
		put(s.bfd, id, v)
	case ipam.KindCommunity:
		put(s.comms, id, v)
	case ipam.KindNode:
		if n, ok := v.(*ipam.Node); ok {
			for _, a := range n.Announced {
				if !a.BGP {
					s.answered[tenantOf(id)+"/"+a.Addr] = true
				}
			}
		}
		put(s.nodes, id, v)
	case ipam.KindDrain:
		put(s.drains, id, v)
	case ipam.KindClusterNode:
		put(s.cnodes, id, v)
	case ipam.KindL2Owner:
		if o, ok := v.(*ipam.L2Owner); ok {
			s.owners[id] = ownerEntry{node: o.Node, rev: ev.Rev}
		} else {
			delete(s.owners, id)
		}
	default:
		return false
	}
	s.dirty[tenantOf(id)] = true
	return true
}

// Take returns the tenants whose inputs changed since the last call (all
// known tenants after a reload or a pool change) and forgets them.
func (s *State) Take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.all {
		for id := range s.allocs {
			s.dirty[tenantOf(id)] = true
		}
		for id := range s.nodes {
			s.dirty[tenantOf(id)] = true
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

// collect returns the values of m whose ID belongs to tenant.
func collect[T any](m map[string]*T, tenant string) []*T {
	var out []*T
	prefix := tenant + "/"
	for id, v := range m {
		if strings.HasPrefix(id, prefix) {
			out = append(out, v)
		}
	}
	return out
}

// Input returns the planner's input for one tenant, and the owner
// records' revisions for conditional updates.
func (s *State) Input(tenant string) (*planner.Input, map[netip.Addr]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := &planner.Input{
		Pools:       make(map[string]*ipam.Pool, len(s.pools)),
		Allocations: collect(s.allocs, tenant),
		L2:          collect(s.l2, tenant),
		BGP:         collect(s.bgp, tenant),
		Peers:       collect(s.peers, tenant),
		BFD:         map[string]*ipam.BFDProfile{},
		Communities: collect(s.comms, tenant),
		L2Owners:    map[netip.Addr]string{},
	}
	for id, p := range s.pools {
		in.Pools[id] = p
	}
	for _, b := range collect(s.bfd, tenant) {
		in.BFD[b.ID] = b
	}
	for _, n := range collect(s.nodes, tenant) {
		c := *n
		c.Live = true
		c.Draining = s.drains[tenant+"/"+n.Name] != nil
		var excluded bool
		c.Labels, excluded = n.Effective(s.cnodes[tenant+"/"+n.Name])
		// An excluded node announces nothing, as a drained one: its L2
		// addresses move to another node before it stops answering.
		c.Draining = c.Draining || excluded
		in.Nodes = append(in.Nodes, &c)
	}
	revs := map[netip.Addr]int64{}
	prefix := tenant + "/"
	for id, o := range s.owners {
		if rest, ok := strings.CutPrefix(id, prefix); ok {
			if a, err := netip.ParseAddr(rest); err == nil {
				in.L2Owners[a] = o.node
				revs[a] = o.rev
			}
		}
	}
	return in, revs
}

// Node returns a live node's registration.
func (s *State) Node(tenant, name string) (*ipam.Node, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[tenant+"/"+name]
	return n, ok
}

// Drained reports whether a node is drained.
func (s *State) Drained(tenant, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drains[tenant+"/"+name] != nil
}

// markDirty marks a tenant changed.
func (s *State) markDirty(tenant string) {
	s.mu.Lock()
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
	for _, n := range collect(s.nodes, tenant) {
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
	o, ok := s.owners[k]
	return ok && o.node != node
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
	nodes := collect(s.nodes, tenant)
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
	in, _ := s.Input(tenant)
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
	prefix := tenant + "/"
	for id := range s.l2 {
		if strings.HasPrefix(id, prefix) {
			return true
		}
	}
	for id := range s.owners {
		if strings.HasPrefix(id, prefix) {
			return true
		}
	}
	return false
}
