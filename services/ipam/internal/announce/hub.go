package announce

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/planner"
)

// Committer commits changes to the state (the store).
type Committer interface {
	Commit(ctx context.Context, ch ipam.Change) (int64, []ipam.Event, error)
}

// Hub computes plans for the tenants whose inputs changed and hands each
// subscribed node its new plan.
type Hub struct {
	state  *State
	store  Committer
	logger *slog.Logger

	mu       sync.Mutex
	sessions map[string]map[*Session]struct{} // by tenant
	leader   atomic.Bool
	// fence is the condition, while this replica leads, that it still
	// does (see LeadOwners): every owner write carries it.
	fence atomic.Pointer[ipam.Cond]

	// planned are the tenants' last plans, used by plan (Run's goroutine)
	// only.
	planned map[string]*planned
	// recorded are the L2 owner sets and deletions this replica
	// committed, by tenant, until its state shows them: owners are
	// computed from them meanwhile (see commitOwners). Only Run's
	// goroutine and LeadOwners touch it.
	recordedMu sync.Mutex
	recorded   map[string]*written
}

// NewHub returns a Hub over a state.
func NewHub(state *State, store Committer, logger *slog.Logger) *Hub {
	return &Hub{state: state, store: store, logger: logger, sessions: map[string]map[*Session]struct{}{},
		planned: map[string]*planned{}, recorded: map[string]*written{}}
}

// Session is one subscribed node's view of its plan: what it was last sent
// and what it should have. A slow announcer never queues up changes: it gets
// the difference between the two when it is ready.
type Session struct {
	Tenant, Node string

	mu     sync.Mutex
	sent   *ipam.NodePlan
	want   *ipam.NodePlan
	synced bool // a snapshot was sent, or the node was found to hold its plan
	// queue, when not empty, are the changes that lead from sent to want,
	// as they were planned: handed out as they are, rather than diffing
	// the two plans, which costs the size of the plan.
	queue []step
	// holds says whether the node holds a plan already (it resumed); nil
	// once the first plan was handed out.
	holds func(*ipam.NodePlan) bool
	ready chan struct{}
}

// step is one planned change of a session's plan, and the plan it makes.
type step struct {
	delta *planner.Delta
	plan  *ipam.NodePlan
}

// maxQueue bounds a session's queue: a slower announcer gets the
// difference between what it was sent and its plan instead.
const maxQueue = 64

// Attach registers a subscribed node; its first plan is computed at once.
func (h *Hub) Attach(tenant, node string) *Session { return h.AttachHolding(tenant, node, nil) }

// AttachHolding registers a subscribed node that may hold its plan
// already: when holds says the node's first plan is the one it holds, the
// node is sent an empty change instead of a snapshot (and changes from
// there on). holds may be nil.
func (h *Hub) AttachHolding(tenant, node string, holds func(*ipam.NodePlan) bool) *Session {
	s := &Session{Tenant: tenant, Node: node, holds: holds, ready: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.sessions[tenant] == nil {
		h.sessions[tenant] = map[*Session]struct{}{}
	}
	h.sessions[tenant][s] = struct{}{}
	h.mu.Unlock()
	h.state.markDirty(tenant)
	return s
}

// Detach forgets a session.
func (h *Hub) Detach(s *Session) {
	h.mu.Lock()
	delete(h.sessions[s.Tenant], s)
	if len(h.sessions[s.Tenant]) == 0 {
		delete(h.sessions, s.Tenant)
	}
	h.mu.Unlock()
}

// setWant makes p the session's plan. d, when not nil, is the change from
// prev to p: queued when prev is the session's plan.
func (s *Session) setWant(p *ipam.NodePlan, d *planner.Delta, prev *ipam.NodePlan) {
	s.mu.Lock()
	if d != nil && s.synced && s.want == prev && (len(s.queue) > 0 || s.sent == prev) && len(s.queue) < maxQueue {
		s.queue = append(s.queue, step{d, p})
	} else {
		s.queue = nil
	}
	s.want = p
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Next blocks until the node's plan differs from what it was sent, and
// returns either the whole plan (the first time) or the change; ok is false
// when ctx is done. The first time, a node that holds its plan already (see
// AttachHolding) gets an empty change instead of the whole plan.
func (s *Session) Next(ctx context.Context) (snapshot *ipam.NodePlan, change *planner.Delta, ok bool) {
	for {
		s.mu.Lock()
		if s.want != nil && !s.synced {
			s.sent, s.synced, s.queue = s.want, true, nil
			p, holds := s.want, s.holds
			s.holds = nil
			s.mu.Unlock()
			if holds != nil && holds(p) {
				return nil, &planner.Delta{}, true
			}
			return p, nil, true
		}
		if s.synced && s.want != s.sent && len(s.queue) > 0 {
			st := s.queue[0]
			s.queue = s.queue[1:]
			s.sent = st.plan
			s.mu.Unlock()
			if !st.delta.Empty() {
				return nil, st.delta, true
			}
			continue
		}
		if s.synced && s.want != s.sent {
			d := planner.Diff(s.sent, s.want)
			s.sent = s.want
			s.mu.Unlock()
			if !d.Empty() {
				return nil, d, true
			}
			continue
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, nil, false
		case <-s.ready:
		}
	}
}

// Plan returns what the session's node was last sent.
func (s *Session) Plan() *ipam.NodePlan {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent
}

// Run recomputes the plans of changed tenants until ctx is done.
func (h *Hub) Run(ctx context.Context) error {
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-h.state.Changed():
		case <-retry.C:
		}
		for _, t := range h.state.Take() {
			if err := h.plan(ctx, t); err != nil {
				h.logger.WarnContext(ctx, "recording L2 owners failed; retrying", "tenant", t, "error", err)
				h.state.markFull(t)
				retry.Reset(100 * time.Millisecond)
			}
		}
	}
}

// plan plans one tenant: from its batch of allocation and L2 owner
// changes when only those changed (planner.Replan), else in full. On the
// elected replica it first records new L2 owners (the plans follow when
// those records come back through the watch); every replica hands its
// sessions their plans, computed from the recorded owners so that all
// replicas agree.
func (h *Hub) plan(ctx context.Context, tenant string) (err error) {
	h.mu.Lock()
	sessions := make([]*Session, 0, len(h.sessions[tenant]))
	for s := range h.sessions[tenant] {
		sessions = append(sessions, s)
	}
	h.mu.Unlock()
	lead := h.leader.Load() && h.state.needsOwners(tenant)
	if len(sessions) == 0 && !lead {
		// Nobody to tell and nothing to record: skip the work.
		delete(h.planned, tenant)
		h.state.dropBatch(tenant)
		return nil
	}
	// In full, the elected replica records the owners while it computes
	// the plans: a dead node's addresses move once the records are back
	// through the watch, and the plans computed now do not move them.
	var recorded chan error
	var full func(*planner.Input)
	if lead {
		full = func(in *planner.Input) {
			recorded = make(chan error, 1)
			go func() { recorded <- h.recordOwners(ctx, tenant, in) }()
		}
	}
	p, u := h.state.replan(tenant, h.planned[tenant], lead, full)
	h.planned[tenant] = p
	switch {
	case recorded != nil:
		defer func() {
			if rerr := <-recorded; rerr != nil {
				err = rerr
			}
		}()
	case lead && len(u.owners) > 0:
		err = h.commitOwners(ctx, tenant, u.owners, false)
	}
	if len(sessions) == 0 {
		return err
	}
	// Make before break: nodes that take over addresses hear of it before
	// the nodes that give them up.
	type next struct {
		s *Session
		p *ipam.NodePlan
	}
	var later []next
	for _, s := range sessions {
		p, ok := planFor(u.plans, s)
		if !ok {
			continue
		}
		d, prev := u.deltas[s.Node], u.prev[s.Node]
		if u.deltas != nil && d == nil && s.wants(p) {
			continue // unchanged
		}
		var gains bool
		if d != nil {
			gains = gainsL2Delta(prev, d)
		} else {
			gains = gainsL2(s.Plan(), p)
		}
		if gains {
			s.setWant(p, d, prev)
		} else {
			later = append(later, next{s, p})
		}
	}
	for _, n := range later {
		n.s.setWant(n.p, u.deltas[n.s.Node], u.prev[n.s.Node])
	}
	return err
}

// wants reports whether p is the session's plan.
func (s *Session) wants(p *ipam.NodePlan) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.want == p
}

// planFor returns the plan to hand a session, or false when it must wait.
// The planner has no plan for a node until the node's registration, written
// just before the session attached, has come back through the watch. A
// session that has had no plan yet waits for it: an empty first snapshot
// would make a reconnecting announcer withdraw every route and stop
// answering L2 until its real plan followed. Once a session has had a plan,
// no plan means the node is no longer live, and it must announce nothing.
func planFor(plans map[string]*ipam.NodePlan, s *Session) (*ipam.NodePlan, bool) {
	if p := plans[s.Node]; p != nil {
		return p, true
	}
	s.mu.Lock()
	started := s.want != nil
	s.mu.Unlock()
	if !started {
		return nil, false
	}
	return &ipam.NodePlan{}, true
}

// Owner sets are committed up to ownerWriters changes at a time (a
// change per shard of the tenant's addresses, see owners.go): the store
// merges queued changes into transactions as large as its MaxOps allows,
// and several transactions in flight let etcd put many into one raft round
// and one fsync (see docs/performance.md, "Reconnects and L2 moves": a node
// holding 10,000 addresses dies). Shards hold distinct addresses, so their
// order does not matter. Each set stays conditional on the one it
// replaces, and every change on the election (the fence), so a replica
// that lost the election writes nothing: a set's condition alone would
// not stop it where the new leader has not rewritten that set yet.
const ownerWriters = 32

// legacyChunk is how many per-address records of an earlier version one
// change deletes (a condition and a deletion each, and the fence).
const legacyChunk = 63

// recordOwners commits the L2 owners the planner chooses for the whole
// tenant where they differ from the recorded ones (a full plan), and
// rewrites per-address records of an earlier version into sets.
func (h *Hub) recordOwners(ctx context.Context, tenant string, in *planner.Input) error {
	want := planner.L2Owners(in)
	var writes []ownerWrite
	for addr, node := range want {
		if in.L2Owners[addr] != node {
			writes = append(writes, ownerWrite{addr, node, in.L2Owners[addr]})
		}
	}
	for addr := range in.L2Owners {
		if _, ok := want[addr]; !ok {
			writes = append(writes, ownerWrite{addr, "", in.L2Owners[addr]})
		}
	}
	return h.commitOwners(ctx, tenant, writes, true)
}

// commitOwners records owners: the owner sets that change, each
// conditional on the set it replaces, then the deletions of the
// per-address records they supersede. The sets are computed from what this
// replica committed when its state does not show it yet: a set is not
// written again from a stale view (it would only fail its condition, and
// load etcd while it is busiest). migrate: also rewrite every per-address
// record into a set.
func (h *Hub) commitOwners(ctx context.Context, tenant string, writes []ownerWrite, migrate bool) error {
	fence := h.fence.Load()
	if fence == nil {
		return nil // no longer leading: the next leader records them
	}
	h.recordedMu.Lock()
	w := h.recorded[tenant]
	if w == nil {
		w = &written{sets: map[setKey]ownerSet{}, legacy: map[netip.Addr]int64{}}
		h.recorded[tenant] = w
	}
	oc := h.state.ownerChanges(tenant, writes, w, migrate)
	h.recordedMu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(ownerWriters)
	for _, sc := range oc.sets {
		g.Go(func() error {
			sc.change.Conds = append(sc.change.Conds, *fence)
			rev, _, err := h.store.Commit(gctx, sc.change)
			if err != nil {
				return err
			}
			h.recordedMu.Lock()
			defer h.recordedMu.Unlock()
			for k, addrs := range sc.wrote {
				w.sets[k] = ownerSet{addrs: addrs, rev: rev}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	// The sets now hold these addresses: their old records go.
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(ownerWriters)
	for chunk := range slices.Chunk(oc.legacy, legacyChunk) {
		g.Go(func() error {
			ch := ipam.Change{Conds: []ipam.Cond{*fence}}
			for _, e := range chunk {
				ref := ipam.Ref{Kind: ipam.KindL2Owner, ID: tenant + "/" + e.addr.String()}
				ch.Conds = append(ch.Conds, ipam.Cond{Ref: ref, Rev: e.rev})
				ch.Deletes = append(ch.Deletes, ref)
			}
			rev, _, err := h.store.Commit(gctx, ch)
			if err != nil {
				return err
			}
			h.recordedMu.Lock()
			defer h.recordedMu.Unlock()
			for _, e := range chunk {
				w.legacy[e.addr] = rev
			}
			return nil
		})
	}
	return g.Wait()
}

// LeadOwners makes this replica the one that records L2 owners until ctx
// is done (it runs while the replica holds the election). Every owner write
// carries fence, the condition that it still holds the election: a replica
// that lost it without noticing yet (it was paused while its lease ran
// out) writes nothing.
func (h *Hub) LeadOwners(ctx context.Context, fence ipam.Cond) error {
	h.fence.Store(&fence)
	defer h.fence.Store(nil)
	h.leader.Store(true)
	defer h.leader.Store(false)
	h.forgetRecorded()
	defer h.forgetRecorded()
	h.logger.InfoContext(ctx, "recording L2 owners for the fleet")
	h.state.markAll()
	<-ctx.Done()
	return nil
}

// gainsL2Delta reports whether d makes plan old answer for an address it
// does not.
func gainsL2Delta(old *ipam.NodePlan, d *planner.Delta) bool {
	for _, l := range d.UpsertL2 {
		if old == nil {
			return true
		}
		if _, found := slices.BinarySearchFunc(old.L2, l.Addr, func(o ipam.PlanL2, a netip.Addr) int { return o.Addr.Compare(a) }); !found {
			return true
		}
	}
	return false
}

// forgetRecorded forgets the records this replica committed: another
// replica may write the records while this one does not lead.
func (h *Hub) forgetRecorded() {
	h.recordedMu.Lock()
	clear(h.recorded)
	h.recordedMu.Unlock()
}

// gainsL2 reports whether plan next answers for an address old does not.
func gainsL2(old, next *ipam.NodePlan) bool {
	have := map[netip.Addr]bool{}
	if old != nil {
		for _, l := range old.L2 {
			have[l.Addr] = true
		}
	}
	for _, l := range next.L2 {
		if !have[l.Addr] {
			return true
		}
	}
	return false
}
