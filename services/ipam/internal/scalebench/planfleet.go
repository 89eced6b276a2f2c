package scalebench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/announce"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/planner"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// hits counts, by address, the plan changes sessions received that name it
// (a route's prefix address, an L2 address), and signals each.
type hits struct {
	mu     sync.Mutex
	n      map[netip.Addr]int
	notify chan struct{}
}

func newHits() *hits { return &hits{n: map[netip.Addr]int{}, notify: make(chan struct{}, 1)} }

func (h *hits) add(addrs []netip.Addr) {
	if len(addrs) == 0 {
		return
	}
	h.mu.Lock()
	for _, a := range addrs {
		h.n[a]++
	}
	h.mu.Unlock()
	select {
	case h.notify <- struct{}{}:
	default:
	}
}

// wait waits until addr has been named want times, and forgets it.
func (h *hits) wait(ctx context.Context, addr netip.Addr, want int, limit time.Duration) error {
	deadline := time.After(limit)
	for {
		h.mu.Lock()
		got := h.n[addr]
		if got >= want {
			delete(h.n, addr)
		}
		h.mu.Unlock()
		if got >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("%s reached %d of %d sessions in %s", addr, got, want, limit)
		case <-h.notify:
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// consume plays an announcer on an in-memory session: it takes every
// snapshot and change, counting the addresses changes name; synced is
// closed at the first snapshot.
func consume(ctx context.Context, s *announce.Session, h *hits, synced chan<- struct{}) {
	first := true
	for {
		snap, d, ok := s.Next(ctx)
		if !ok {
			return
		}
		if snap != nil && first {
			first = false
			close(synced)
			continue
		}
		if d == nil {
			continue
		}
		var addrs []netip.Addr
		for _, r := range d.UpsertRoutes {
			addrs = append(addrs, r.Prefix.Addr())
		}
		for _, r := range d.RemoveRoutes {
			addrs = append(addrs, r.Prefix.Addr())
		}
		for _, l := range d.UpsertL2 {
			addrs = append(addrs, l.Addr)
		}
		addrs = append(addrs, d.RemoveL2...)
		h.add(addrs)
	}
}

// changeAlloc is the c-th allocation the planning phase makes in t00:
// alternately announced over BGP (every node changes) and L2 (one node).
func changeAlloc(c int) *ipam.Allocation {
	mode := "bgp"
	if c%2 == 1 {
		mode = "l2"
	}
	return &ipam.Allocation{Tenant: planTenant, ID: fmt.Sprintf("change%04d", c), Owner: fmt.Sprintf("ns/change-%d", c), Pool: "scale",
		OwnerLabels: selector.NewSet("mode", mode),
		Addrs:       []netip.Addr{netip.AddrFrom4([4]byte{198, 19, 255, byte(1 + c%250)})}}
}

// measurePlanning runs a fleet over the state and measures the CPU of
// allocation changes in t00 (see the part's comment).
func measurePlanning(ctx context.Context, client *store.Client, logger *slog.Logger, sz planSize, row *planRow) (err error) {
	// Reading a million objects at once takes longer than an etcd call
	// may by default, on a busy machine.
	st := store.New(client, logger, store.Options{CallTimeout: loadTimeout, ElectionTTL: time.Minute})
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() { _ = st.Run(ctx) })

	state := announce.NewState()
	events, rev, err := st.LoadState(ctx)
	if err != nil {
		return err
	}
	state.Replace(events, rev)
	events = nil //nolint:ineffassign,wastedassign // let the collector have them
	wg.Go(func() { _ = st.WatchState(ctx, rev, nil, state.Apply) })
	hub := announce.NewHub(state, st, logger)
	wg.Go(func() { _ = hub.Run(ctx) })
	wg.Go(func() { _ = st.Campaign(ctx, "l2owners", "bench", hub.LeadOwners) })

	h := newHits()
	var synced []chan struct{}
	for j := range sz.nodes {
		s := hub.Attach(planTenant, nodeName(j))
		c := make(chan struct{})
		synced = append(synced, c)
		wg.Go(func() { consume(ctx, s, h, c) })
	}
	for _, c := range synced {
		select {
		case <-c:
		case <-time.After(5 * time.Minute):
			return errors.New("sessions not given their first plan in 5 minutes")
		}
	}

	// The owners to wait for: the elected fleet records them all before
	// the changes start.
	in := state.Input(planTenant)
	owners := len(planner.L2Owners(in))
	deadline := time.Now().Add(5 * time.Minute)
	for {
		cur := state.Input(planTenant)
		if len(cur.L2Owners) == owners {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("L2 owners: %d recorded of %d after 5 minutes", len(cur.L2Owners), owners)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // the last owner records' plans handed out

	// The reference, with the fleet idle: planning t00 in full.
	in = state.Input(planTenant)
	runtime.GC()
	const fullRuns = 3
	var plans map[string]*ipam.NodePlan
	c0 := cpuTime()
	for range fullRuns {
		plans = planner.Plans(in, planner.L2Owners(in))
	}
	row.full = (cpuTime() - c0) / fullRuns
	row.routes = plans[nodeName(1)].Routes.Len()
	row.l2Owners = owners
	in, plans = nil, nil //nolint:ineffassign,wastedassign // let the collector have them
	runtime.GC()

	changes := 40
	if sz.allocs < 1000 {
		changes = 20
	}
	var wall time.Duration
	c0 = cpuTime()
	for c := range changes / 2 {
		a := changeAlloc(c)
		want := sz.nodes // a route on every node
		if mode, _ := a.OwnerLabels.Get("mode"); mode == "l2" {
			want = 1 // its owner answers
		}
		r := ref(ipam.KindAllocation, a.Tenant+"/"+a.ID)
		for _, ch := range []ipam.Change{{Puts: []ipam.Put{{Ref: r, Value: a}}}, {Deletes: []ipam.Ref{r}}} {
			start := time.Now()
			if _, _, err := st.Commit(ctx, ch); err != nil {
				return err
			}
			if err := h.wait(ctx, a.Addrs[0], want, time.Minute); err != nil {
				return err
			}
			wall += time.Since(start)
		}
	}
	row.changes = changes
	row.cpu = (cpuTime() - c0) / time.Duration(changes)
	row.wall = wall / time.Duration(changes)
	return nil
}
