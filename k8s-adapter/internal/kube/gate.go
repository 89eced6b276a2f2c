package kube

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// gate makes the addresses Services get independent of the order in which
// they and the configuration they depend on (MetalLB's IPAddressPools)
// arrive. While the configuration is being imported, a Service that holds
// no allocation is not allocated for by the workers: it is parked. After
// the import, a batch gives every Service of the adapter's that holds no
// allocation (parked ones, ones that failed, ones waiting for a pool) its
// turn, oldest first (creation timestamp, then namespace/name) and one at a
// time, so that what a Service gets is what it would get had everything
// been applied one after another. Services that hold an allocation are not
// held back: the IPAM answers them with what they hold.
//
// The gate starts closed: the first batch runs once the first import (or,
// without MetalLB resources, the resync at start) is done.
type gate struct {
	mu     sync.Mutex
	closed bool
	gen    uint64              // configuration changes seen
	parked map[string]struct{} // Services that met the closed gate

	// The batch's current Service: it passes the closed gate, and its turn
	// ends (turn closed) once its allocation is decided.
	current string
	seq     uint64 // turns given
	turn    chan struct{}
}

func newGate() *gate {
	return &gate{closed: true, parked: map[string]struct{}{}}
}

// changed records a configuration change: the gate closes until the import
// that includes it and its batch are done.
func (g *gate) changed() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gen++
	g.closed = true
}

// generation returns the number of configuration changes seen; an import
// takes it before it reads the configuration.
func (g *gate) generation() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gen
}

// admit reports whether a Service that holds no allocation may be
// allocated for now; if not, it is parked for the next batch.
func (g *gate) admit(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed || key == g.current {
		return true
	}
	g.parked[key] = struct{}{}
	return false
}

// begin is called as a worker starts on key; it returns the turn it works
// for, or 0 if key has no turn (see end).
func (g *gate) begin(key string) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if key != "" && key == g.current {
		return g.seq
	}
	return 0
}

// decided ends key's turn once its allocation is decided (allocated or
// refused): the next Service may go while this one's status is written.
func (g *gate) decided(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if key == g.current {
		g.endTurn()
	}
}

// end ends turn seq when the worker that started on it finishes without
// deciding an allocation (the Service was deleted, asks for something
// invalid, or failed before allocating).
func (g *gate) end(seq uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if seq != 0 && seq == g.seq {
		g.endTurn()
	}
}

func (g *gate) endTurn() {
	if g.turn != nil {
		close(g.turn)
		g.turn = nil
	}
}

// give makes key the current Service and returns the channel closed when
// its turn ends.
func (g *gate) give(key string) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	g.current = key
	g.turn = make(chan struct{})
	return g.turn
}

// takeParked returns the parked Services and forgets them.
func (g *gate) takeParked() map[string]struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.parked
	g.parked = map[string]struct{}{}
	return p
}

// openIf opens the gate unless the configuration changed since generation
// gen (the next import's batch will run) and returns true; it returns false
// if Services were parked during the batch and none of that happened: they
// need a batch of their own first.
func (g *gate) openIf(gen uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.current = ""
	if g.gen != gen {
		return true
	}
	if len(g.parked) > 0 {
		return false
	}
	g.closed = false
	return true
}

// turnTimeout bounds the wait for one Service's turn: a turn that does not
// end (an API server that does not answer) must not stop the others.
const turnTimeout = 30 * time.Second

// runBatch gives a turn, oldest first, to every Service of the adapter's
// that holds no allocation (all: to every such Service; else to the parked
// ones only), then opens the gate unless the configuration changed since
// generation gen.
func (c *Controller) runBatch(ctx context.Context, gen uint64, all bool) {
	for ctx.Err() == nil {
		keys := c.batchKeys(c.gate.takeParked(), all)
		if len(keys) > 0 {
			c.logger.DebugContext(ctx, "allocating in order", "services", len(keys), "first", keys[0])
		}
		for _, key := range keys {
			turn := c.gate.give(key)
			c.queue.Add(key)
			select {
			case <-turn:
			case <-ctx.Done():
				return
			case <-time.After(turnTimeout):
				c.logger.WarnContext(ctx, "a Service's turn did not end; going on", "service", key, "after", turnTimeout.String())
			}
		}
		if c.gate.openIf(gen) {
			return
		}
		all = false
	}
}

// batchKeys returns the keys of the Services to allocate for in a batch,
// oldest first: parked ones, and with all every LoadBalancer Service of the
// adapter's that holds no allocation.
func (c *Controller) batchKeys(parked map[string]struct{}, all bool) []string {
	type entry struct {
		key     string
		created time.Time
	}
	var list []entry
	for _, obj := range c.services.GetStore().List() {
		svc, ok := obj.(*corev1.Service)
		if !ok {
			continue
		}
		key := svc.Namespace + "/" + svc.Name
		_, isParked := parked[key]
		delete(parked, key)
		if !isParked && (!all || !c.cfg.Filter.Wants(toRequest(svc))) {
			continue
		}
		if _, isHeld := c.held.Load(key); isHeld && !isParked {
			continue
		}
		list = append(list, entry{key, svc.CreationTimestamp.Time})
	}
	slices.SortFunc(list, func(a, b entry) int {
		return cmp.Or(a.created.Compare(b.created), cmp.Compare(a.key, b.key))
	})
	keys := make([]string, 0, len(list)+len(parked))
	for _, e := range list {
		keys = append(keys, e.key)
	}
	// Parked Services no longer in the cache (deleted): queued all the same.
	for key := range parked {
		c.queue.Add(key)
	}
	return keys
}
