package replica_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

func TestTenantQuotaAndTokens(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	conn, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := ctxT(t)
	tenants := ipamv1.NewTenantServiceClient(conn)
	tokens := ipamv1.NewTokenServiceClient(conn)
	mustPool(t, n, "q", &ipamv1.Pool{Ranges: []string{"203.0.113.0/28"}, Tenants: []string{"quota"}})

	if _, err := tenants.CreateTenant(ctx, &ipamv1.CreateTenantRequest{TenantId: "quota", Tenant: &ipamv1.Tenant{MaxAddresses: 2}}); err != nil {
		t.Fatal(err)
	}
	mustAllocate(t, n, "quota", &ipamv1.Allocation{Owner: "a"})
	mustAllocate(t, n, "quota", &ipamv1.Allocation{Owner: "b"})
	waitFor(t, "the quota to bite", func() bool {
		_, err := allocate(ctx, n, "quota", &ipamv1.Allocation{Owner: "c"})
		return err != nil
	})
	_, err = allocate(ctx, n, "quota", &ipamv1.Allocation{Owner: "c"})
	wantCode(t, err, codes.ResourceExhausted)
	got, err := tenants.GetTenant(ctx, &ipamv1.GetTenantRequest{Name: "tenants/quota"})
	if err != nil || got.GetTenant().GetAddressesUsed() != 2 {
		t.Fatalf("GetTenant = %v, %v", got, err)
	}
	// Raising the quota lets the owner in.
	if _, err := tenants.UpdateTenant(ctx, &ipamv1.UpdateTenantRequest{
		Tenant: &ipamv1.Tenant{Name: "tenants/quota", MaxAddresses: 3}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"max_addresses"}},
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new quota", func() bool {
		_, err := allocate(ctx, n, "quota", &ipamv1.Allocation{Owner: "c"})
		return err == nil
	})

	// Tokens: the secret is shown once, verifies, and stops verifying when
	// revoked; a tenant token needs a tenant.
	_, err = tokens.CreateToken(ctx, &ipamv1.CreateTokenRequest{TokenId: "bad", Token: &ipamv1.Token{Role: ipamv1.Role_ROLE_TENANT}})
	wantCode(t, err, codes.InvalidArgument)
	tok, err := tokens.CreateToken(ctx, &ipamv1.CreateTokenRequest{TokenId: "c1-adapter", Token: &ipamv1.Token{Role: ipamv1.Role_ROLE_TENANT, Tenant: "tenants/c1"}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := tokens.VerifyToken(ctx, &ipamv1.VerifyTokenRequest{Secret: tok.GetSecret()})
	if err != nil || v.GetToken().GetTenant() != "tenants/c1" || v.GetToken().GetRole() != ipamv1.Role_ROLE_TENANT {
		t.Fatalf("VerifyToken = %v, %v", v, err)
	}
	_, err = tokens.VerifyToken(ctx, &ipamv1.VerifyTokenRequest{Secret: tok.GetSecret() + "x"})
	wantCode(t, err, codes.NotFound)
	if _, err := tokens.DeleteToken(ctx, &ipamv1.DeleteTokenRequest{Name: "tokens/c1-adapter"}); err != nil {
		t.Fatal(err)
	}
	_, err = tokens.VerifyToken(ctx, &ipamv1.VerifyTokenRequest{Secret: tok.GetSecret()})
	wantCode(t, err, codes.NotFound)
}

// A tenant's quota holds under concurrent allocations on one replica:
// allocations being committed count against it, not only committed ones.
func TestTenantQuotaConcurrent(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	mustPool(t, n, "qc", &ipamv1.Pool{Ranges: []string{"2001:db8:9c::/120"}, Tenants: []string{"qc"}})
	createTenant(t, n, "qc", 5)
	// The replica applies its own tenant change to its index at once.
	const callers = 32
	ok, refused := allocateAtOnce(t, callers, func(i int) error {
		_, err := allocate(ctxT(t), n, "qc", &ipamv1.Allocation{Owner: fmt.Sprintf("o%02d", i)})
		return err
	})
	if ok != 5 || refused != callers-5 {
		t.Fatalf("%d allocated and %d refused, want 5 and %d", ok, refused, callers-5)
	}
}

// The quota holds across replicas too: allocations through two replicas at
// the same instant cannot both pass against the same count (each writes the
// tenant's guard; the loser waits until it has seen the winner's commit).
func TestTenantQuotaTwoReplicas(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	a := startNode(t, env.client, replica.Options{})
	// One pool per replica's callers, so that the two never meet on an
	// address: only the quota relates them.
	mustPool(t, a, "q2a", &ipamv1.Pool{Ranges: []string{"2001:db8:9d::/120"}, Tenants: []string{"q2"}})
	mustPool(t, a, "q2b", &ipamv1.Pool{Ranges: []string{"2001:db8:9e::/120"}, Tenants: []string{"q2"}})
	createTenant(t, a, "q2", 5)
	b := startNode(t, env.dial(t), replica.Options{}) // loads the quota at start
	nodes := []*node{a, b}
	for round := range 3 {
		const callers = 24
		ok, _ := allocateAtOnce(t, callers, func(i int) error {
			pool := []string{"pools/q2a", "pools/q2b"}[i%2]
			_, err := allocate(ctxT(t), nodes[i%2], "q2", &ipamv1.Allocation{Owner: fmt.Sprintf("r%d-o%02d", round, i), RequestedPool: pool})
			return err
		})
		if ok != 5 {
			t.Fatalf("round %d: %d allocated, want 5 (the quota)", round, ok)
		}
		// Free the tenant's addresses for the next round.
		for i := range callers {
			_, _ = a.allocs.Release(ctxT(t), &ipamv1.ReleaseRequest{Parent: "tenants/q2", Owner: fmt.Sprintf("r%d-o%02d", round, i), Hold: durationpb.New(0)})
		}
	}
}

// Through gRPC: at its quota, a tenant that released an owner with a hold
// can allocate another owner at once, and the pool then holds no more than
// the quota (the hold was ended to make room).
func TestTenantQuotaCountsHolds(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	mustPool(t, n, "qh", &ipamv1.Pool{Ranges: []string{"2001:db8:9f::/120"}, Tenants: []string{"qh"}})
	createTenant(t, n, "qh", 2)
	mustAllocate(t, n, "qh", &ipamv1.Allocation{Owner: "a"})
	mustAllocate(t, n, "qh", &ipamv1.Allocation{Owner: "b"})
	mustRelease(t, n, &ipamv1.ReleaseRequest{Parent: "tenants/qh", Owner: "a", Hold: dur(time.Hour)})
	tenantUse := func() []uint64 {
		t.Helper()
		conn, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		got, err := ipamv1.NewTenantServiceClient(conn).GetTenant(ctxT(t), &ipamv1.GetTenantRequest{Name: "tenants/qh"})
		if err != nil {
			t.Fatal(err)
		}
		return []uint64{got.GetTenant().GetAddressesUsed(), got.GetTenant().GetAddressesHeld()}
	}
	diff(t, "used and held after a's release", []uint64{1, 1}, tenantUse())
	mustAllocate(t, n, "qh", &ipamv1.Allocation{Owner: "c"})
	diff(t, "the pool's usage", []string{"IP_FAMILY_IPV6 size=256 used=2 free=254"}, usage(getPool(t, n, "qh")))
	diff(t, "used and held after c", []uint64{2, 0}, tenantUse())
}

// allocateAtOnce runs call for 0..n-1 at the same instant and counts the
// calls that succeeded and those refused RESOURCE_EXHAUSTED; any other
// answer fails the test.
func allocateAtOnce(t *testing.T, n int, call func(i int) error) (ok, refused int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			err := call(i)
			mu.Lock()
			defer mu.Unlock()
			switch status.Code(err) {
			case codes.OK:
				ok++
			case codes.ResourceExhausted:
				refused++
			default:
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return ok, refused
}
