package announce

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/beaconlb/beacon/pkg/testwait"
	"github.com/beaconlb/beacon/services/ipam/internal/addrspace"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/planner"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// wait bounds every wait for something that must happen: generous, for a
// machine under a load of 10 and more.
const wait = time.Minute

// lab is a real store over an embedded etcd whose whole state is watched
// into a State, as a replica's follower does, and a Hub over them that
// records L2 owners (the elected replica). The test drives the Hub's
// planning itself, one batch at a time.
type lab struct {
	t       *testing.T
	ctx     context.Context
	st      *store.Store
	state   *State
	hub     *Hub
	applied atomic.Int64 // the revision the state has reached
	written atomic.Int64 // the last revision the hub committed
}

// committed is the store, noting the revisions the hub commits at.
type committed struct {
	st  *store.Store
	rev *atomic.Int64
}

func (c committed) Commit(ctx context.Context, ch ipam.Change) (int64, []ipam.Event, error) {
	rev, evs, err := c.st.Commit(ctx, ch)
	if err == nil {
		c.rev.Store(max(c.rev.Load(), rev))
	}
	return rev, evs, err
}

func newLab(t *testing.T) *lab {
	return newLabWrapped(t, func(c Committer) Committer { return c })
}

// newLabWrapped is newLab with the Hub's commits going through wrap.
func newLabWrapped(t *testing.T, wrap func(Committer) Committer) *lab {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: t.TempDir(), LogLevel: "fatal"})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	// The election's lease outlasts any stall of a loaded machine: a hub
	// that lost it mid-test would record nothing.
	l := &lab{t: t, ctx: ctx, st: store.New(emb.Client(), logger, store.Options{ElectionTTL: time.Minute}), state: NewState()}
	l.hub = NewHub(l.state, wrap(committed{l.st, &l.written}), logger)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = l.st.Run(runCtx) })
	wg.Go(func() {
		_ = l.st.WatchState(runCtx, 0, nil, func(evs []ipam.Event, rev int64) {
			l.state.Apply(evs, rev)
			l.applied.Store(rev)
		})
	})
	t.Cleanup(func() { stop(); wg.Wait(); emb.Close() })
	l.elect(l.hub, "l2owners")
	return l
}

// elect makes hub the one that records L2 owners, as the winner of the
// named election (each hub of a test its own), until the test ends.
func (l *lab) elect(hub *Hub, election string) {
	l.t.Helper()
	ctx, stop := context.WithCancel(l.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = l.st.Campaign(ctx, election, "lab", hub.LeadOwners) })
	l.t.Cleanup(func() { stop(); wg.Wait() })
	testwait.Until(l.t, wait, "the hub elected in "+election, hub.leader.Load)
}

// lostFence returns the fence of an election won and lost: the
// condition a replica that lost it without noticing would write with.
func (l *lab) lostFence() ipam.Cond {
	l.t.Helper()
	ctx, stop := context.WithCancel(l.ctx)
	defer stop()
	var fence ipam.Cond
	err := l.st.Campaign(ctx, "lost", "lab", func(_ context.Context, f ipam.Cond) error {
		fence = f
		stop() // resign, and campaign no more
		return nil
	})
	if err != nil || fence.Rev == 0 {
		l.t.Fatalf("campaign: %v, fence %+v", err, fence)
	}
	return fence
}

// commit writes a change through the store and waits for the state to
// see it.
func (l *lab) commit(ch ipam.Change) {
	l.t.Helper()
	rev, _, err := l.st.Commit(l.ctx, ch)
	if err != nil {
		l.t.Fatal(err)
	}
	l.reach(rev)
}

// reach waits for the state to reach revision rev.
func (l *lab) reach(rev int64) {
	l.t.Helper()
	deadline := time.Now().Add(wait)
	for l.applied.Load() < rev {
		if time.Now().After(deadline) {
			l.t.Fatalf("the state did not reach revision %d within %s", rev, wait)
		}
		time.Sleep(time.Millisecond)
	}
}

// settle plans the tenant until the L2 owners it records have all come
// back through the watch and nothing more is recorded.
func (l *lab) settle(tenant string) {
	l.t.Helper()
	for range 20 {
		before := l.written.Load()
		if err := l.hub.plan(l.ctx, tenant); err != nil {
			l.t.Logf("recording owners: %v (planned in full next)", err)
			l.state.markFull(tenant)
			continue
		}
		after := l.written.Load()
		if after == before {
			return
		}
		l.reach(after)
	}
	l.t.Fatal("the L2 owners did not settle in 20 rounds")
}

// announcer is what a session's announcer holds: its snapshot with every
// change applied.
type announcer struct {
	s    *Session
	plan *ipam.NodePlan
}

// catchUp takes every snapshot and change waiting for the announcer.
func (a *announcer) catchUp(ctx context.Context) {
	for {
		c, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		snap, delta, ok := a.s.Next(c)
		cancel()
		switch {
		case !ok:
			return
		case snap != nil:
			a.plan = snap
		default:
			a.plan = planner.Apply(a.plan, delta)
		}
	}
}

func putOf(kind ipam.Kind, id string, v any) ipam.Put {
	return ipam.Put{Ref: ipam.Ref{Kind: kind, ID: id}, Value: v}
}

func mustRange(t *testing.T, s string) addrspace.Range {
	t.Helper()
	r, err := addrspace.ParseRange(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReplanMatchesFullPlans: random sequences of allocations, releases,
// updates of endpoints and labels, nodes coming and going, drains and
// configuration changes, written through a real store and watched into
// the state; after each batch, once the L2 owners the Hub records have
// come back, every announcer's plan (its snapshot with every change
// applied) is what planner.Plans computes from scratch, and the recorded
// owners are planner.L2Owners', each address in one owner set. Batches of allocation changes only are
// planned incrementally.
func TestReplanMatchesFullPlans(t *testing.T) {
	const tenant = "t1"
	l := newLab(t)
	sel := func(k, v string) []selector.Selector {
		return []selector.Selector{{MatchLabels: map[string]string{k: v}}}
	}
	l.commit(ipam.Change{Puts: []ipam.Put{
		putOf(ipam.KindPool, "p4", &ipam.Pool{Name: "p4", Ranges: []addrspace.Range{mustRange(t, "198.51.100.0/26")}, Labels: map[string]string{"mode": "l2"}}),
		putOf(ipam.KindPool, "p4b", &ipam.Pool{Name: "p4b", Ranges: []addrspace.Range{mustRange(t, "203.0.113.0/26")}, Labels: map[string]string{"mode": "bgp"}}),
		putOf(ipam.KindPool, "p6", &ipam.Pool{Name: "p6", Ranges: []addrspace.Range{mustRange(t, "2001:db8::/122")}, Labels: map[string]string{"mode": "l2"}}),
		putOf(ipam.KindL2Advertisement, tenant+"/l2", &ipam.L2Advertisement{Tenant: tenant, ID: "l2",
			PoolSelectors: sel("mode", "l2"), NodePriorities: []ipam.NodePriority{{Priority: 1, Selector: selector.Selector{MatchLabels: map[string]string{"rack": "a"}}}}}),
		putOf(ipam.KindBGPAdvertisement, tenant+"/all", &ipam.BGPAdvertisement{Tenant: tenant, ID: "all", Pools: []string{"p4b", "p6"}, Communities: []string{"64500:1"}}),
		putOf(ipam.KindBGPAdvertisement, tenant+"/agg", &ipam.BGPAdvertisement{Tenant: tenant, ID: "agg", Pools: []string{"p4b"}, AggregationLength: 28,
			NodeSelectors: sel("role", "edge")}),
		putOf(ipam.KindBGPPeer, tenant+"/r1", &ipam.BGPPeer{Tenant: tenant, ID: "r1", MyASN: 64500, PeerASN: 64500, PeerAddress: netip.MustParseAddr("203.0.113.254")}),
		putOf(ipam.KindBGPPeer, tenant+"/r6", &ipam.BGPPeer{Tenant: tenant, ID: "r6", MyASN: 64500, PeerASN: 65000, PeerAddress: netip.MustParseAddr("2001:db8:ff::1"),
			NodeSelectors: sel("rack", "b")}),
	}})

	rng := rand.New(rand.NewPCG(18, 1))
	const nodes = 7
	nodeName := func(i int) string { return fmt.Sprintf("n%d", i) }
	nodeValue := func(i int) *ipam.Node {
		return &ipam.Node{Tenant: tenant, Name: nodeName(i), Live: true,
			Labels:     map[string]string{"rack": []string{"a", "b"}[i%2], "role": []string{"edge", "core", "core"}[i%3]},
			Interfaces: []ipam.Interface{{Name: "eth0", Up: true}}}
	}
	var puts []ipam.Put
	for i := range nodes - 1 { // the last one comes later
		puts = append(puts, putOf(ipam.KindNode, tenant+"/"+nodeName(i), nodeValue(i)))
	}
	l.commit(ipam.Change{Puts: puts})
	var anns []*announcer
	for i := range nodes {
		anns = append(anns, &announcer{s: l.hub.Attach(tenant, nodeName(i))})
	}
	up := map[int]bool{}
	for i := range nodes - 1 {
		up[i] = true
	}

	allocs := map[string]*ipam.Allocation{}
	free := func(pool string) netip.Addr {
		for {
			var a netip.Addr
			switch pool {
			case "p4":
				a = netip.AddrFrom4([4]byte{198, 51, 100, byte(rng.IntN(64))})
			case "p4b":
				a = netip.AddrFrom4([4]byte{203, 0, 113, byte(rng.IntN(64))})
			default:
				a = netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", rng.IntN(64)))
			}
			used := slices.ContainsFunc(slices.Collect(maps.Values(allocs)), func(x *ipam.Allocation) bool { return slices.Contains(x.Addrs, a) })
			if !used {
				return a
			}
		}
	}
	endpoints := func() []string {
		var out []string
		for range 1 + rng.IntN(3) {
			out = append(out, nodeName(rng.IntN(nodes)))
		}
		return out
	}
	next := 0
	newAlloc := func() *ipam.Allocation {
		next++
		a := &ipam.Allocation{Tenant: tenant, ID: fmt.Sprintf("a%03d", next), Owner: "ns/svc", OwnerLabels: selector.SetOf(map[string]string{"app": "web"})}
		switch k := rng.IntN(4); k {
		case 0:
			a.Pool, a.Addrs = "p4b", []netip.Addr{free("p4b")}
		case 1: // dual-stack
			a.Pool, a.Addrs = "p4", []netip.Addr{free("p4"), free("p6")}
		case 2: // active-active
			a.Pool, a.AddressCount = "p4", 2
			a.Addrs = []netip.Addr{free("p4")}
			a.Addrs = append(a.Addrs, free("p4"))
		default:
			a.Pool, a.Addrs = "p6", []netip.Addr{free("p6")}
		}
		if rng.IntN(3) == 0 {
			a.TrafficPolicy, a.EndpointNodes = ipam.TrafficLocal, endpoints()
		}
		return a
	}
	ref := func(a *ipam.Allocation) ipam.Ref {
		return ipam.Ref{Kind: ipam.KindAllocation, ID: a.Tenant + "/" + a.ID}
	}

	check := func(step string) {
		t.Helper()
		in := l.state.Input(tenant)
		if diff := cmp.Diff(planner.L2Owners(in), in.L2Owners, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("%s: recorded L2 owners (-L2Owners +recorded):\n%s", step, diff)
		}
		if sets, _ := l.stored(); !cmp.Equal(in.L2Owners, sets, cmpopts.EquateEmpty()) {
			t.Fatalf("%s: owners in the state and in etcd's owner sets (-state +etcd):\n%s", step, cmp.Diff(in.L2Owners, sets, cmpopts.EquateEmpty()))
		}
		want := planner.Plans(in, in.L2Owners)
		for _, a := range anns {
			a.catchUp(l.ctx)
			w := want[a.s.Node]
			if w == nil && a.plan != nil {
				w = &ipam.NodePlan{}
			}
			if diff := cmp.Diff(w, a.plan, cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
				t.Fatalf("%s: %s's plan (-Plans +announcer):\n%s", step, a.s.Node, diff)
			}
		}
	}
	l.settle(tenant)
	check("start")

	incremental := 0
	for step := range 120 {
		var ch ipam.Change
		onlyAllocs := true
		touched := map[string]bool{} // one write per object per commit
		for range 1 + rng.IntN(4) {
			ids := slices.DeleteFunc(slices.Sorted(maps.Keys(allocs)), func(id string) bool { return touched[id] })
			switch k := rng.IntN(20); {
			case k < 7 || len(ids) == 0:
				a := newAlloc()
				allocs[a.ID], touched[a.ID] = a, true
				ch.Puts = append(ch.Puts, ipam.Put{Ref: ref(a), Value: a})
			case k < 10:
				a := allocs[ids[rng.IntN(len(ids))]]
				delete(allocs, a.ID)
				touched[a.ID] = true
				ch.Deletes = append(ch.Deletes, ref(a))
			case k < 15:
				a := *allocs[ids[rng.IntN(len(ids))]]
				if rng.IntN(2) == 0 {
					a.TrafficPolicy, a.EndpointNodes = ipam.TrafficLocal, endpoints()
				} else {
					a.TrafficPolicy, a.EndpointNodes = ipam.TrafficCluster, nil
					a.OwnerLabels = selector.SetOf(map[string]string{"app": []string{"web", "db"}[rng.IntN(2)]})
				}
				allocs[a.ID], touched[a.ID] = &a, true
				ch.Puts = append(ch.Puts, ipam.Put{Ref: ref(&a), Value: &a})
			case k < 17:
				onlyAllocs = false
				i := rng.IntN(nodes)
				if touched["node/"+nodeName(i)] {
					continue
				}
				touched["node/"+nodeName(i)] = true
				nref := ipam.Ref{Kind: ipam.KindNode, ID: tenant + "/" + nodeName(i)}
				if up[i] {
					ch.Deletes = append(ch.Deletes, nref)
				} else {
					ch.Puts = append(ch.Puts, ipam.Put{Ref: nref, Value: nodeValue(i)})
				}
				up[i] = !up[i]
			case k < 18:
				onlyAllocs = false
				i := rng.IntN(nodes)
				if touched["drain/"+nodeName(i)] {
					continue
				}
				touched["drain/"+nodeName(i)] = true
				dref := ipam.Ref{Kind: ipam.KindDrain, ID: tenant + "/" + nodeName(i)}
				if rng.IntN(2) == 0 {
					ch.Puts = append(ch.Puts, ipam.Put{Ref: dref, Value: &ipam.Drain{Tenant: tenant, Node: nodeName(i)}})
				} else {
					ch.Deletes = append(ch.Deletes, dref)
				}
			default:
				if touched["agg"] {
					continue
				}
				touched["agg"], onlyAllocs = true, false
				ad := &ipam.BGPAdvertisement{Tenant: tenant, ID: "agg", Pools: []string{"p4b"}, AggregationLength: []int{0, 27, 28}[rng.IntN(3)],
					NodeSelectors: sel("role", []string{"edge", "core"}[rng.IntN(2)])}
				ch.Puts = append(ch.Puts, putOf(ipam.KindBGPAdvertisement, tenant+"/agg", ad))
			}
		}
		prep := l.hub.planned[tenant].prep
		l.commit(ch)
		l.settle(tenant)
		if onlyAllocs && l.hub.planned[tenant].prep == prep {
			incremental++
		}
		check(fmt.Sprintf("step %d", step))
	}
	if incremental < 30 {
		t.Errorf("only %d batches planned incrementally", incremental)
	}
}
