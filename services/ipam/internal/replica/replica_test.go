package replica_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

// Two replicas on one etcd, 64 concurrent callers, a pool of 16 addresses
// and 100 owners: each address goes to exactly one owner, every other owner
// gets ResourceExhausted, and both replicas agree.
func TestTwoReplicasFillPoolExactlyOnce(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	a := startNode(t, env.client, replica.Options{})
	b := startNode(t, env.dial(t), replica.Options{}) // over loopback, as on an external etcd
	mustPool(t, a, "small", &ipamv1.Pool{Ranges: []string{"192.0.2.0/28"}})

	const owners, callers = 100, 64
	type result struct {
		owner string
		addr  string
		err   error
	}
	work := make(chan int)
	results := make(chan result, owners)
	var wg sync.WaitGroup
	for c := range callers {
		n := a
		if c%2 == 1 {
			n = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				owner := fmt.Sprintf("svc-%03d", i)
				got, err := allocate(ctxT(t), n, "c1", &ipamv1.Allocation{Owner: owner})
				r := result{owner: owner, err: err}
				if err == nil {
					r.addr = got.GetAddresses()[0]
				}
				results <- r
			}
		}()
	}
	for i := range owners {
		work <- i
	}
	close(work)
	wg.Wait()
	close(results)

	holder := map[string]string{}
	exhausted := 0
	for r := range results {
		switch {
		case r.err == nil:
			if prev, dup := holder[r.addr]; dup {
				t.Errorf("address %s given to %s and %s", r.addr, prev, r.owner)
			}
			holder[r.addr] = r.owner
		case status.Code(r.err) == codes.ResourceExhausted:
			exhausted++
		default:
			t.Errorf("owner %s: unexpected error %v", r.owner, r.err)
		}
	}
	if len(holder) != 16 || exhausted != owners-16 {
		t.Fatalf("got %d allocated and %d exhausted, want 16 and %d", len(holder), exhausted, owners-16)
	}
	// Both replicas list the same 16 allocations from etcd.
	for name, n := range map[string]*node{"a": a, "b": b} {
		resp, err := n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/c1", PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, al := range resp.GetAllocations() {
			got[al.GetAddresses()[0]] = al.GetOwner()
		}
		if diff := cmp.Diff(holder, got); diff != "" {
			t.Errorf("replica %s lists other allocations (-want +got):\n%s", name, diff)
		}
	}
	// The next allocation is refused on both replicas.
	for _, n := range []*node{a, b} {
		_, err := allocate(ctxT(t), n, "c1", &ipamv1.Allocation{Owner: "late"})
		wantCode(t, err, codes.ResourceExhausted)
	}
}

// Owners with one sharing key share one address even when they ask through
// two replicas: one right after another (the second replica has not seen
// the first's commit yet) and all at the same instant. Each key's guard
// makes the later commits fail, wait for their replica to see the first,
// and share.
func TestTwoReplicasShareOneAddressPerKey(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	nodes := []*node{startNode(t, env.client, replica.Options{}), startNode(t, env.dial(t), replica.Options{})}
	const tenant, keys, owners = "share2", 8, 12
	mustPool(t, nodes[0], "share2", &ipamv1.Pool{Ranges: []string{"2001:db8:5d::/120"}, Tenants: []string{tenant}})
	alloc := func(n *node, key string, i int) (string, error) {
		resp, err := allocate(ctxT(t), n, tenant, &ipamv1.Allocation{
			Owner: fmt.Sprintf("ns/%s-%02d", key, i), SharingKey: key,
			Ports: []*ipamv1.Port{{Port: int32(8000 + i), Protocol: ipamv1.Protocol_PROTOCOL_TCP}},
		})
		if err != nil {
			return "", err
		}
		return strings.Join(resp.GetAddresses(), ","), nil
	}
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		// One right after the other, through different replicas.
		first, err := alloc(nodes[k%2], key, 0)
		if err != nil {
			t.Fatal(err)
		}
		second, err := alloc(nodes[(k+1)%2], key, 1)
		if err != nil {
			t.Fatal(err)
		}
		diff(t, key+": the second owner's address", first, second)
	}
	// All at the same instant, through both replicas, on fresh keys.
	got := make(map[string]map[string]int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for k := range keys {
		key := fmt.Sprintf("c%d", k)
		got[key] = map[string]int{}
		for i := range owners {
			wg.Go(func() {
				<-start
				addr, err := alloc(nodes[i%2], key, i)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("%s owner %d: %v", key, i, err)
					return
				}
				got[key][addr]++
			})
		}
	}
	close(start)
	wg.Wait()
	for key, addrs := range got {
		if len(addrs) != 1 {
			t.Errorf("%s: owners got %d addresses, want 1: %v", key, len(addrs), addrs)
		}
	}
}

// A restart of etcd and of the replica keeps every allocation where it was.
func TestRestartKeepsAllocations(t *testing.T) {
	dir := t.TempDir()
	env := startEtcd(t, dir)
	n := startNode(t, env.client, replica.Options{})
	mustPool(t, n, "web", &ipamv1.Pool{Ranges: []string{"198.51.100.0/24", "2001:db8:1::/64"}})
	before := map[string][]string{}
	for i := range 20 {
		al := mustAllocate(t, n, "c1", &ipamv1.Allocation{
			Owner:          fmt.Sprintf("ns/svc-%d", i),
			IpFamilyPolicy: ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_REQUIRE_DUAL_STACK,
		})
		before[al.GetOwner()] = al.GetAddresses()
	}
	n.stop()
	env.stop()

	env2 := startEtcd(t, dir)
	n2 := startNode(t, env2.client, replica.Options{})
	after := map[string][]string{}
	resp, err := n2.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/-"})
	if err != nil {
		t.Fatal(err)
	}
	for _, al := range resp.GetAllocations() {
		after[al.GetOwner()] = al.GetAddresses()
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("allocations changed across restart (-before +after):\n%s", diff)
	}
	// The restarted index knows what is taken: the next address is new.
	al := mustAllocate(t, n2, "c1", &ipamv1.Allocation{Owner: "ns/new", IpFamilies: []ipamv1.IPFamily{ipamv1.IPFamily_IP_FAMILY_IPV4}})
	if got, want := al.GetAddresses()[0], "198.51.100.20"; got != want {
		t.Fatalf("after restart got %s, want %s", got, want)
	}
	// Idempotent per owner across the restart.
	again := mustAllocate(t, n2, "c1", &ipamv1.Allocation{Owner: "ns/svc-3", IpFamilyPolicy: ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_REQUIRE_DUAL_STACK})
	if diff := cmp.Diff(before["ns/svc-3"], again.GetAddresses()); diff != "" {
		t.Fatalf("owner got other addresses after restart: %s", diff)
	}
}
