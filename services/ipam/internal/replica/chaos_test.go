package replica_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

// Random allocations and releases through two replicas, with sharing keys
// and a quota, then the invariants read back from etcd through either
// replica: no address has two owners unless they share it under one key;
// owners of one key (whose ports never clash here) hold one address; the
// quota holds; both replicas agree.
func TestTwoReplicasRandomOpsKeepInvariants(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	a := startNode(t, env.client, replica.Options{})
	conn, err := grpc.NewClient(a.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const tenant, quota = "chaos", 24
	mustPool(t, a, "chaos4", &ipamv1.Pool{Ranges: []string{"192.0.2.0/27"}, Tenants: []string{tenant}})
	if _, err := ipamv1.NewTenantServiceClient(conn).CreateTenant(ctxT(t), &ipamv1.CreateTenantRequest{TenantId: tenant, Tenant: &ipamv1.Tenant{MaxAddresses: quota}}); err != nil {
		t.Fatal(err)
	}
	b := startNode(t, env.client, replica.Options{})
	nodes := []*node{a, b}

	const workers, ops, owners = 16, 40, 48
	keys := []string{"", "", "k1", "k2", "k3"}
	keyOf := func(o int) string { return keys[o%len(keys)] } // an owner keeps its key
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range ops {
				o := rng.IntN(owners)
				n := nodes[rng.IntN(2)]
				owner := fmt.Sprintf("ns/o%02d", o)
				if rng.IntN(3) == 0 {
					_, err := n.allocs.Release(ctxT(t), &ipamv1.ReleaseRequest{Parent: "tenants/" + tenant, Owner: owner, Hold: dur(0)})
					if err != nil && status.Code(err) != codes.NotFound {
						t.Errorf("release %s: %v", owner, err)
					}
					continue
				}
				_, err := allocate(ctxT(t), n, tenant, &ipamv1.Allocation{
					Owner: owner, SharingKey: keyOf(o),
					Ports: []*ipamv1.Port{{Port: int32(1000 + o), Protocol: ipamv1.Protocol_PROTOCOL_TCP}},
				})
				switch status.Code(err) {
				case codes.OK, codes.ResourceExhausted:
				default:
					t.Errorf("allocate %s: %v", owner, err)
				}
			}
		})
	}
	wg.Wait()

	var views [2]map[string][]string // owner -> addresses, per replica
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
			return true
		})
	}
	diff(t, "the two replicas' allocations", views[0], views[1])
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
		for _, o := range os {
			var k int
			if _, err := fmt.Sscanf(o, "ns/o%d", &k); err != nil {
				t.Fatal(err)
			}
			key := keyOf(k)
			if len(os) > 1 && key == "" {
				t.Errorf("address %s held by %v, one of them without a sharing key", ad, os)
			}
			if key != "" {
				if byKey[key] == nil {
					byKey[key] = map[string]bool{}
				}
				byKey[key][ad] = true
			}
		}
		if len(os) > 1 {
			k0 := ""
			for i, o := range os {
				var k int
				_, _ = fmt.Sscanf(o, "ns/o%d", &k)
				if i == 0 {
					k0 = keyOf(k)
				} else if keyOf(k) != k0 {
					t.Errorf("address %s held by %v under different keys", ad, os)
				}
			}
		}
	}
	for key, addrs := range byKey {
		if len(addrs) != 1 {
			t.Errorf("owners of key %s hold %d addresses, want 1: %v", key, len(addrs), addrs)
		}
	}
	t.Logf("%d owners hold %d addresses (quota %d); keys: %v", len(views[0]), used, quota, byKey)
}
