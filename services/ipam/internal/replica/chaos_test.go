package replica_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beaconlb/beacon/pkg/loopback"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// Random allocations and releases through two replicas, with sharing keys
// and a quota, then the invariants read back from etcd through either
// replica: no address has two owners unless they share it under one key;
// owners of one key (whose ports never clash here) hold one address; the
// quota holds; both replicas agree.
func TestTwoReplicasRandomOpsKeepInvariants(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	a := startNode(t, env.client, replica.Options{})
	const tenant, quota = "chaos", 24
	mustPool(t, a, "chaos4", &ipamv1.Pool{Ranges: []string{"192.0.2.0/27"}, Tenants: []string{tenant}})
	createTenant(t, a, tenant, quota)
	b := startNode(t, env.dial(t), replica.Options{})
	nodes := []*node{a, b}

	keys := []string{"", "", "k1", "k2", "k3"}
	keyOf := func(o int) string { return keys[o%len(keys)] } // an owner keeps its key
	randomLoad(t, load{tenant: tenant, workers: 16, ops: 40, owners: 48, seed: 7, keyOf: keyOf,
		pick: func(rng *rand.Rand) *node { return nodes[rng.IntN(2)] }})
	checkInvariants(t, nodes, tenant, "chaos4", quota, keyOf)
}

// A replica stopped abruptly under load (its gRPC server and its work cut
// off with commits in flight) leaves no claim without an allocation and
// breaks no invariant: the other replica carries on and reads back a
// consistent state.
func TestReplicaStoppedMidLoadKeepsInvariants(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	a := startNode(t, env.client, replica.Options{})
	b := startNode(t, env.dial(t), replica.Options{})
	const tenant = "midstop"
	mustPool(t, a, "midstop", &ipamv1.Pool{Ranges: []string{"198.51.100.0/27"}, Tenants: []string{tenant}})
	keys := []string{"", "k1", "k2"}
	keyOf := func(o int) string { return keys[o%len(keys)] }
	var stopped atomic.Bool
	third := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		randomLoad(t, load{tenant: tenant, workers: 16, ops: 40, owners: 40, seed: 11, keyOf: keyOf, third: third,
			pick: func(rng *rand.Rand) *node {
				if rng.IntN(2) == 0 && !stopped.Load() {
					return a
				}
				return b
			},
			// Calls to the replica being stopped may fail; the live one's must not.
			tolerate: func(n *node, c codes.Code) bool { return n == a && (c == codes.Unavailable || c == codes.Canceled) },
		})
	}()
	<-third
	a.stop() // on the test's goroutine: it may fail the test
	stopped.Store(true)
	<-finished
	checkInvariants(t, []*node{b}, tenant, "midstop", 1<<30, keyOf)
}

// Losing an etcd member under load, the leader at that, breaks no
// invariant: a 3-member cluster in this process, two replicas each with
// its own client over every member, random allocations and releases, and
// the leader killed (no leadership handover) a third of the way through.
func TestEtcdLeaderLossKeepsInvariants(t *testing.T) {
	members, endpoints := startEtcdCluster(t)
	var nodes []*node
	for range 2 {
		client, err := store.Dial(ctxT(t), store.DialConfig{Endpoints: endpoints})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.Close() })
		nodes = append(nodes, startNode(t, client, replica.Options{}))
	}
	const tenant = "memberloss"
	mustPool(t, nodes[0], "memberloss", &ipamv1.Pool{Ranges: []string{"203.0.113.0/27"}, Tenants: []string{tenant}})
	keys := []string{"", "k1", "k2"}
	keyOf := func(o int) string { return keys[o%len(keys)] }
	third := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		randomLoad(t, load{tenant: tenant, workers: 12, ops: 40, owners: 40, seed: 13, keyOf: keyOf, third: third,
			pick: func(rng *rand.Rand) *node { return nodes[rng.IntN(2)] },
			// While the cluster elects a new leader; the caller retries.
			tolerate: func(_ *node, c codes.Code) bool {
				return c == codes.Unavailable || c == codes.DeadlineExceeded || c == codes.Aborted
			},
		})
	}()
	<-third
	stopped := false
	for _, m := range members {
		if m.IsLeader() {
			m.Kill() // a crash: no leadership handover
			stopped = true
			break
		}
	}
	if !stopped {
		members[0].Kill()
	}
	<-finished
	checkInvariants(t, nodes, tenant, "memberloss", 1<<30, keyOf)
}

// startEtcdCluster starts a 3-member etcd cluster in this process and
// returns its members (each closed when the test ends, if not before) and
// their client URLs.
func startEtcdCluster(t *testing.T) ([]*store.Embedded, []string) {
	t.Helper()
	ports, err := loopback.FreePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	var initial []string
	for i := range 3 {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	members := make([]*store.Embedded, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		cfg := store.EmbeddedConfig{
			Dir: dirs[i], ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]), LogLevel: "fatal",
			Name: fmt.Sprintf("m%d", i), PeerURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]), InitialCluster: strings.Join(initial, ","),
		}
		wg.Go(func() { members[i], errs[i] = store.StartEmbedded(ctxT(t), cfg) })
	}
	wg.Wait()
	var endpoints []string
	for i, m := range members {
		if errs[i] != nil {
			t.Fatalf("member %d: %v", i, errs[i])
		}
		t.Cleanup(m.Close)
		endpoints = append(endpoints, m.Endpoints()...)
	}
	return members, endpoints
}

// load is a random mix of allocations (two in three) and releases (with no
// hold) of owners "ns/oNN", each with its own port and a fixed sharing key.
type load struct {
	tenant               string
	workers, ops, owners int
	seed                 uint64
	keyOf                func(owner int) string
	pick                 func(*rand.Rand) *node // the replica of one call
	tolerate             func(*node, codes.Code) bool
	third                chan struct{} // closed when a third of the calls are made (optional)
}

// randomLoad runs l and fails the test on an unexpected answer (OK,
// NotFound and ResourceExhausted are expected).
func randomLoad(t *testing.T, l load) {
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range l.workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), l.seed))
			for range l.ops {
				if done.Add(1) == int64(l.workers*l.ops/3) && l.third != nil {
					close(l.third)
				}
				o := rng.IntN(l.owners)
				n := l.pick(rng)
				owner := fmt.Sprintf("ns/o%02d", o)
				var err error
				if rng.IntN(3) == 0 {
					_, err = n.allocs.Release(ctxT(t), &ipamv1.ReleaseRequest{Parent: "tenants/" + l.tenant, Owner: owner, Hold: dur(0)})
				} else {
					_, err = allocate(ctxT(t), n, l.tenant, &ipamv1.Allocation{
						Owner: owner, SharingKey: l.keyOf(o),
						Ports: []*ipamv1.Port{{Port: int32(1000 + o), Protocol: ipamv1.Protocol_PROTOCOL_TCP}},
					})
				}
				switch c := status.Code(err); {
				case c == codes.OK, c == codes.NotFound, c == codes.ResourceExhausted:
				case l.tolerate != nil && l.tolerate(n, c):
				default:
					t.Errorf("%s: %v", owner, err)
				}
			}
		})
	}
	wg.Wait()
}

// checkInvariants reads the tenant's allocations back through every live
// replica and checks: the replicas agree; no address has two owners unless
// they share it under one key; the owners of one key hold one address
// (their ports never clash in these tests); the quota holds; and the pool's
// count of claimed addresses equals the addresses allocations hold (no
// claim without an allocation, none missing; releases here keep no holds).
func checkInvariants(t *testing.T, nodes []*node, tenant, pool string, quota int, keyOf func(int) string) {
	t.Helper()
	views := make([]map[string][]string, len(nodes)) // owner -> addresses, per replica
	for i, n := range nodes {
		eventually(t, 10*time.Second, "a full listing", func() bool {
			resp, err := n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/" + tenant, PageSize: 1000})
			if err != nil {
				t.Logf("list: %v", err)
				return false
			}
			views[i] = map[string][]string{}
			for _, al := range resp.GetAllocations() {
				views[i][al.GetOwner()] = al.GetAddresses()
			}
			return i == 0 || cmp.Equal(views[0], views[i])
		})
		diff(t, "the replicas' allocations", views[0], views[i])
	}
	ownerKey := func(o string) string {
		var k int
		if _, err := fmt.Sscanf(o, "ns/o%d", &k); err != nil {
			t.Fatal(err)
		}
		return keyOf(k)
	}
	used := 0
	holders := map[string][]string{} // address -> owners
	for owner, addrs := range views[0] {
		used += len(addrs)
		for _, ad := range addrs {
			holders[ad] = append(holders[ad], owner)
		}
	}
	if used > quota {
		t.Errorf("%d addresses allocated, over the quota of %d", used, quota)
	}
	byKey := map[string]map[string]bool{} // key -> addresses
	for ad, os := range holders {
		k0 := ownerKey(os[0])
		for _, o := range os {
			switch k := ownerKey(o); {
			case len(os) > 1 && k == "":
				t.Errorf("address %s held by %v, one of them without a sharing key", ad, os)
			case k != k0:
				t.Errorf("address %s held by %v under different keys", ad, os)
			}
		}
		if k0 != "" {
			if byKey[k0] == nil {
				byKey[k0] = map[string]bool{}
			}
			byKey[k0][ad] = true
		}
	}
	for key, addrs := range byKey {
		if len(addrs) != 1 {
			t.Errorf("owners of key %s hold %d addresses, want 1: %v", key, len(addrs), addrs)
		}
	}
	for _, n := range nodes {
		eventually(t, 10*time.Second, "the pool's count of claims to match", func() bool {
			p := getPool(t, n, pool)
			var claimed uint64
			for _, f := range p.GetStatus().GetFamilies() {
				claimed += f.GetUsed()
			}
			if claimed != uint64(len(holders)) {
				t.Logf("pool %s: %d addresses claimed, allocations hold %d", pool, claimed, len(holders))
				return false
			}
			return true
		})
	}
	t.Logf("%d owners hold %d distinct addresses (%d counted against the quota of %d); keys: %v", len(views[0]), len(holders), used, quota, byKey)
}
