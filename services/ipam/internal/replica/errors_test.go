package replica_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// wantOpaque fails unless err has the code and exactly the message, which
// tells the caller nothing of the server's insides.
func wantOpaque(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	st := status.Convert(err)
	if err == nil || st.Code() != code || st.Message() != msg {
		t.Fatalf("got %v, want code %v with message %q", err, code, msg)
	}
	for _, leak := range []string{"/beacon/", "store:", "etcd", "127.0.0.1", "decode"} {
		if strings.Contains(st.Message(), leak) {
			t.Errorf("message %q leaks %q", st.Message(), leak)
		}
	}
}

// A stored object this replica cannot read is an internal error, and its
// cause stays in the server's log.
func TestInternalErrorsSayNothing(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	name := nameOf("broken", "ns/svc")
	key := "/beacon/v1/state/allocs/broken/" + allocationID("ns/svc")
	if _, err := env.client.Etcd().Put(ctxT(t), key, "{not json"); err != nil {
		t.Fatal(err)
	}
	_, err := n.allocs.GetAllocation(ctxT(t), &ipamv1.GetAllocationRequest{Name: name})
	wantOpaque(t, err, codes.Internal, "internal error")
	_, err = n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/broken"})
	wantOpaque(t, err, codes.Internal, "internal error")
	_, err = n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/-"})
	wantOpaque(t, err, codes.Internal, "internal error")
	// Another tenant's list is not concerned.
	if _, err := n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/fine"}); err != nil {
		t.Fatalf("list another tenant: %v", err)
	}
	// Once the object is gone, the list answers again (it waits for the
	// replica to have seen the delete).
	if _, err := env.client.Etcd().Delete(ctxT(t), key); err != nil {
		t.Fatal(err)
	}
	resp, err := n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/broken"})
	if err != nil || len(resp.GetAllocations()) != 0 {
		t.Fatalf("list after the delete: %v, %v; want no allocations and no error", resp, err)
	}
}

// With etcd dead (the member stopped, the replica's client still trying to
// reach it), calls fail as Unavailable once the store's bound on one etcd
// call runs out, long before the caller's own deadline, and a later call
// does not queue behind the dead ones.
func TestDeadEtcdFailsFast(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.dial(t), replica.Options{EtcdCallTimeout: 500 * time.Millisecond})
	mustPool(t, n, "dead", &ipamv1.Pool{Ranges: []string{"192.0.2.0/29"}, Tenants: []string{"dead"}})
	env.kill()

	for i := range 3 {
		start := time.Now()
		_, err := n.allocs.Allocate(ctxT(t), &ipamv1.AllocateRequest{
			Parent: "tenants/dead", Allocation: &ipamv1.Allocation{Owner: fmt.Sprintf("o%d", i)},
		})
		wantOpaque(t, err, codes.Unavailable, "storage unavailable; retry")
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("allocate %d: failed after %v, want about the 500ms bound (the caller's deadline is 30s)", i, took)
		}
	}
	start := time.Now()
	_, err := n.pools.GetPool(ctxT(t), &ipamv1.GetPoolRequest{Name: "pools/dead"})
	wantOpaque(t, err, codes.Unavailable, "storage unavailable; retry")
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("get pool: failed after %v, want about the 500ms bound", took)
	}
}

// With the replica's etcd connection gone (closed under a replica on an
// external etcd, or the embedded etcd stopped under an in-process client),
// calls fail as Unavailable (retry), without etcd's own words or the keys
// it was asked for.
func TestStorageErrorsSayNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// client is the replica's client to env; cut cuts it off once
		// the replica has a pool.
		client func(t *testing.T, env *etcdEnv) *store.Client
		cut    func(env *etcdEnv, c *store.Client)
	}{
		{
			name:   "connection closed",
			client: func(t *testing.T, env *etcdEnv) *store.Client { return env.dial(t) },
			cut:    func(_ *etcdEnv, c *store.Client) { _ = c.Close() }, // as when ipamd shuts down while serving
		},
		{
			name:   "embedded etcd stopped",
			client: func(_ *testing.T, env *etcdEnv) *store.Client { return env.client },
			cut:    func(env *etcdEnv, _ *store.Client) { env.kill() },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := startEtcd(t, t.TempDir())
			c := tc.client(t, env)
			n := startNode(t, c, replica.Options{})
			mustPool(t, n, "gone", &ipamv1.Pool{Ranges: []string{"192.0.2.0/29"}, Tenants: []string{"gone"}})
			tc.cut(env, c)

			// Each call takes etcd's client about 2.5 s of retries to give up.
			_, err := n.pools.GetPool(ctxT(t), &ipamv1.GetPoolRequest{Name: "pools/gone"})
			wantOpaque(t, err, codes.Unavailable, "storage unavailable; retry")
			_, err = n.allocs.Allocate(ctxT(t), &ipamv1.AllocateRequest{Parent: "tenants/gone", Allocation: &ipamv1.Allocation{Owner: "o"}})
			wantOpaque(t, err, codes.Unavailable, "storage unavailable; retry")
		})
	}
}
