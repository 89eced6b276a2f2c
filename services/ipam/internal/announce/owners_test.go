package announce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/beaconlb/beacon/services/ipam/internal/addrspace"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/planner"
)

// counting counts the changes a Hub commits, and the storage operations
// in them.
type counting struct {
	Committer
	changes, ops atomic.Int64
}

func (c *counting) Commit(ctx context.Context, ch ipam.Change) (int64, []ipam.Event, error) {
	c.changes.Add(1)
	c.ops.Add(int64(len(ch.Conds) + len(ch.Puts) + len(ch.Deletes)))
	return c.Committer.Commit(ctx, ch)
}

// ownerLab is a lab with one L2 pool and advertisement for tenant "t1",
// and its Hub's commits counted.
func ownerLab(t *testing.T) (*lab, *counting) {
	t.Helper()
	c := &counting{}
	l := newLabWrapped(t, func(cm Committer) Committer { c.Committer = cm; return c })
	l.commit(ipam.Change{Puts: []ipam.Put{
		putOf(ipam.KindPool, "p6", &ipam.Pool{Name: "p6", Ranges: []addrspace.Range{mustRange(t, "2001:db8::/112")}}),
		putOf(ipam.KindL2Advertisement, "t1/l2", &ipam.L2Advertisement{Tenant: "t1", ID: "l2", Pools: []string{"p6"}}),
	}})
	return l, c
}

func nodePut(name string) ipam.Put {
	return putOf(ipam.KindNode, "t1/"+name, &ipam.Node{Tenant: "t1", Name: name, Live: true, Interfaces: []ipam.Interface{{Name: "eth0", Up: true}}})
}

func nodeDelete(name string) ipam.Ref { return ipam.Ref{Kind: ipam.KindNode, ID: "t1/" + name} }

// allocate commits n allocations of one address each, from 2001:db8::1 on.
func (l *lab) allocate(n int) {
	l.t.Helper()
	for from := 0; from < n; from += 100 {
		var ch ipam.Change
		for i := from; i < min(n, from+100); i++ {
			a := &ipam.Allocation{Tenant: "t1", ID: fmt.Sprintf("a%05d", i), Pool: "p6", Addrs: []netip.Addr{addrN(i)}}
			ch.Puts = append(ch.Puts, putOf(ipam.KindAllocation, "t1/"+a.ID, a))
		}
		l.commit(ch)
	}
}

func addrN(i int) netip.Addr {
	return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte((i + 1) >> 8), 15: byte(i + 1)})
}

// stored reads the owner records in etcd: the sets' owners by address
// (an address in two sets fails the test), and the per-address records.
func (l *lab) stored() (sets, legacy map[netip.Addr]string) {
	l.t.Helper()
	evs, _, err := l.st.LoadState(l.ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	sets, legacy = map[netip.Addr]string{}, map[netip.Addr]string{}
	for _, ev := range evs {
		switch v := ev.Value.(type) {
		case *ipam.L2OwnerSet:
			if _, node, shard, ok := ipam.ParseL2OwnerSetID(ev.Ref.ID); !ok || node != v.Node || shard != v.Shard {
				l.t.Errorf("owner set %s holds node %s, shard %d", ev.Ref.ID, v.Node, v.Shard)
			}
			if len(v.Addrs) == 0 {
				l.t.Errorf("owner set %s is empty", ev.Ref.ID)
			}
			for _, a := range v.Addrs {
				if o, ok := sets[a]; ok {
					l.t.Errorf("%s is in two owner sets: %s's and %s's", a, o, v.Node)
				}
				sets[a] = v.Node
			}
		case *ipam.L2Owner:
			legacy[v.Addr] = v.Node
		}
	}
	return sets, legacy
}

// handFed returns a replica's state and hub, the state fed by hand (no
// watch): loaded as of now, at the revision returned. The hub is elected
// (in an election of its own) unless fence is given: then it acts as the
// winner of the election fence is from.
func (l *lab) handFed(fence *ipam.Cond) (*State, *Hub, int64) {
	state := NewState()
	rev := l.load(state)
	hub := NewHub(state, l.st, slog.New(slog.DiscardHandler))
	if fence == nil {
		l.elect(hub, "handfed")
	} else {
		hub.fence.Store(fence)
		hub.leader.Store(true)
	}
	return state, hub, rev
}

// load replaces state with what etcd holds now, and returns its revision.
func (l *lab) load(state *State) int64 {
	l.t.Helper()
	evs, rev, err := l.st.LoadState(l.ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	state.Replace(evs, rev)
	return rev
}

// A node holding 2,000 addresses dies: its addresses move to the others
// in a few dozen changes (not one per address), every address is in
// exactly one set, and the recorded owners are planner.L2Owners'.
func TestOwnerSetsMoveInFewWrites(t *testing.T) {
	l, c := ownerLab(t)
	l.commit(ipam.Change{Puts: []ipam.Put{nodePut("n0")}})
	const n = 2000
	l.allocate(n)
	l.settle("t1")
	sets, _ := l.stored()
	if len(sets) != n {
		t.Fatalf("%d addresses recorded, want %d", len(sets), n)
	}
	for a, node := range sets {
		if node != "n0" {
			t.Fatalf("%s owned by %s, want n0 (alone when allocated)", a, node)
		}
	}
	var up []ipam.Put
	for i := 1; i < 10; i++ {
		up = append(up, nodePut(fmt.Sprintf("n%d", i)))
	}
	l.commit(ipam.Change{Puts: up})
	l.settle("t1")
	changes, ops := c.changes.Load(), c.ops.Load()
	l.commit(ipam.Change{Deletes: []ipam.Ref{nodeDelete("n0")}})
	l.settle("t1")
	changes, ops = c.changes.Load()-changes, c.ops.Load()-ops
	sets, legacy := l.stored()
	in := l.state.Input("t1")
	if diff := cmp.Diff(planner.L2Owners(in), in.L2Owners, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("recorded L2 owners (-L2Owners +recorded):\n%s", diff)
	}
	if diff := cmp.Diff(in.L2Owners, sets, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("owners in the state and in etcd (-state +etcd):\n%s", diff)
	}
	if len(legacy) != 0 || len(sets) != n {
		t.Fatalf("%d addresses in sets and %d per-address records, want %d and 0", len(sets), len(legacy), n)
	}
	for a, node := range sets {
		if node == "n0" {
			t.Fatalf("%s still owned by the dead node", a)
		}
	}
	// 32 shards, each rewriting n0's set (deleted) and the 9 others'.
	// Each change also compares the fence.
	if maxOps := int64(2*ownerShards*10 + ownerShards); changes > ownerShards || ops > maxOps {
		t.Errorf("the move took %d changes of %d operations in all; want at most %d and %d", changes, ops, ownerShards, maxOps)
	}
	t.Logf("%d addresses moved in %d changes, %d operations", n, changes, ops)
}

// A replica that lost the election without noticing (it was paused while
// its lease ran out), acting on a stale view, writes nothing. The sets'
// conditions alone would not stop it: a shard where the new leader moved
// nothing still holds the sets the stale one read (it failed so in 1 CI
// run of many); its changes fail on the election's key, gone with its
// lease.
func TestOwnerSetsStaleLeaderWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// moved: the elected replica moves n0's addresses away after the
		// stale one last read; else nothing moved, and every set the
		// stale one would rewrite is still as it read it.
		moved bool
	}{{"after a move", true}, {"nothing moved", false}} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := ownerLab(t)
			l.commit(ipam.Change{Puts: []ipam.Put{nodePut("n0"), nodePut("n1"), nodePut("n2")}})
			l.allocate(200)
			l.settle("t1")
			// The stale replica's view: as of now, and never updated again.
			lost := l.lostFence()
			staleState, stale, rev := l.handFed(&lost)
			if tc.moved {
				l.commit(ipam.Change{Deletes: []ipam.Ref{nodeDelete("n0")}})
				l.settle("t1")
			}
			before, _ := l.stored()
			// The stale one, believing n1 died, would move n1's addresses
			// to the others.
			staleState.Apply([]ipam.Event{{Ref: nodeDelete("n1"), Deleted: true, Rev: rev + 1}}, rev+1)
			err := stale.plan(l.ctx, "t1")
			if !errors.Is(err, ipam.ErrConflict) {
				t.Fatalf("the stale replica's owner writes: %v, want a conflict", err)
			}
			after, _ := l.stored()
			if diff := cmp.Diff(before, after); diff != "" {
				t.Fatalf("the stale replica changed the owners (-before +after):\n%s", diff)
			}
		})
	}
}

// Per-address owner records of an earlier version are read as owners and
// rewritten into sets by the elected replica: no address changes owner
// meanwhile or after, and the old records are gone.
func TestOwnerSetsUpgradeFromPerAddressRecords(t *testing.T) {
	l, _ := ownerLab(t)
	l.commit(ipam.Change{Puts: []ipam.Put{nodePut("n0"), nodePut("n1"), nodePut("n2")}})
	const n = 300
	l.allocate(n)
	// What an earlier version recorded: owners the planner keeps (sticky),
	// though it would spread fresh addresses otherwise.
	old := map[netip.Addr]string{}
	for from := 0; from < n; from += 60 {
		var ch ipam.Change
		for i := from; i < min(n, from+60); i++ {
			a := addrN(i)
			old[a] = fmt.Sprintf("n%d", i%7%3)
			ch.Puts = append(ch.Puts, putOf(ipam.KindL2Owner, "t1/"+a.String(), &ipam.L2Owner{Addr: a, Node: old[a]}))
		}
		l.commit(ch)
	}
	in := l.state.Input("t1")
	if diff := cmp.Diff(old, in.L2Owners); diff != "" {
		t.Fatalf("per-address records as owners (-records +state):\n%s", diff)
	}
	// Every owner change the state sees from here on (its batch) is a
	// move.
	l.state.mu.Lock()
	l.state.tenant("t1").batch = batch{}
	l.state.mu.Unlock()
	var moved []netip.Addr
	for range 20 {
		l.state.mu.Lock()
		for a := range l.state.tenant("t1").batch.owners {
			moved = append(moved, a) // changed, if only for a moment
		}
		l.state.mu.Unlock()
		before := l.written.Load()
		if err := l.hub.plan(l.ctx, "t1"); err != nil {
			t.Fatal(err)
		}
		if l.written.Load() == before {
			break
		}
		l.reach(l.written.Load())
	}
	if len(moved) > 0 {
		t.Fatalf("%d addresses changed owner during the upgrade, first %s", len(moved), moved[0])
	}
	sets, legacy := l.stored()
	if len(legacy) != 0 {
		t.Errorf("%d per-address records left after the upgrade", len(legacy))
	}
	if diff := cmp.Diff(old, sets); diff != "" {
		t.Fatalf("owners after the upgrade (-before +sets):\n%s", diff)
	}
	if diff := cmp.Diff(old, l.state.Input("t1").L2Owners); diff != "" {
		t.Fatalf("owners in the state after the upgrade (-before +state):\n%s", diff)
	}
}

// A node joins just after the elected replica recorded the owners of new
// addresses, and its state shows the node before those records: the plan
// made then, which sees the addresses without owners, moves none of them
// to the new node. (Its sets' conditions are taken from what the replica
// committed, so only the owner each decision saw can catch this; an etcd
// leader election, which delays the watch, made it show in
// replica.TestEtcdLeaderLossKeepsAnnouncerSessions.)
func TestOwnerSetsNodeJoiningBeforeTheRecordsShow(t *testing.T) {
	l, _ := ownerLab(t)
	l.commit(ipam.Change{Puts: []ipam.Put{nodePut("n0")}})
	const n = 40
	l.allocate(n)
	state, hub, _ := l.handFed(nil)
	// n1 registers; the replica records n0 as every address's owner (the
	// only live node it knows of).
	join := nodePut("n1")
	joined, _, err := l.st.Commit(l.ctx, ipam.Change{Puts: []ipam.Put{join}})
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.plan(l.ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	want, _ := l.stored()
	if len(want) != n {
		t.Fatalf("%d owners recorded, want %d", len(want), n)
	}
	// The watch shows the registration, not yet the owners.
	state.Apply([]ipam.Event{{Ref: join.Ref, Value: join.Value, Rev: joined}}, joined)
	if err := hub.plan(l.ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	// Then everything, and a plan from that.
	l.load(state)
	if err := hub.plan(l.ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	got, _ := l.stored()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("owners after n1 joined (-first recorded +now):\n%s", diff)
	}
}
