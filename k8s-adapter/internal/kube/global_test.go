package kube_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// TestGlobalGroupAcrossClusters: two adapters of two tenants (two clusters
// sharing the IPAM) each have a Service with beacon.io/global-group: both
// Services show the same address; a Cluster-policy member's ready endpoint
// nodes reach the IPAM (a member without them is withdrawn); the group lists
// both members, and none once both Services are gone.
func TestGlobalGroupAcrossClusters(t *testing.T) {
	east, west := newEnv(t, nil), newEnv(t, nil)
	ctx := context.Background()
	cc, err := grpc.NewClient(ipamd.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	groups := ipamv1.NewGlobalGroupServiceClient(cc)
	pool := east.tenant + "-global"
	if _, err := ipam.Pools.CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: pool, Pool: &ipamv1.Pool{
		Ranges: []string{east.v4(0)}, Tenants: []string{east.tenant, west.tenant},
	}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ipam.Pools.DeletePool(context.Background(), &ipamv1.DeletePoolRequest{Name: "pools/" + pool, Force: true})
	})
	g, err := groups.CreateGlobalGroup(ctx, &ipamv1.CreateGlobalGroupRequest{Parent: "pools/" + pool, GlobalGroupId: "web",
		GlobalGroup: &ipamv1.GlobalGroup{Tenants: []string{"tenants/" + east.tenant, "tenants/" + west.tenant}}})
	if err != nil {
		t.Fatal(err)
	}
	name := g.GetGlobalGroup().GetName()
	t.Cleanup(func() {
		_, _ = groups.DeleteGlobalGroup(context.Background(), &ipamv1.DeleteGlobalGroupRequest{Name: name})
	})
	east.start(nil)
	west.start(nil)
	join := func(s *corev1.Service) { s.Annotations = map[string]string{"beacon.io/global-group": pool + "/web"} }
	east.create(east.svc("web", join))
	west.create(west.svc("web", join, func(s *corev1.Service) {
		s.Annotations["beacon.io/global-role"] = "backup"
	}))
	a, b := east.waitIPs("web", 1), west.waitIPs("web", 1)
	if a[0] != b[0] {
		t.Fatalf("east shows %v, west %v: want one address", a, b)
	}
	if al := west.allocation(west.ns + "/web"); al.GetGlobalGroup() != name || al.GetGlobalRole() != ipamv1.GlobalRole_GLOBAL_ROLE_BACKUP {
		t.Errorf("west's allocation: group %q role %v", al.GetGlobalGroup(), al.GetGlobalRole())
	}

	// A Cluster-policy member's endpoint nodes reach the IPAM.
	yes := true
	if _, err := k8s.DiscoveryV1().EndpointSlices(east.ns).Create(ctx, slice(east.ns, "web", "web-a", endpoint{"n1", &yes}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "east's endpoint nodes", func() (bool, string) {
		al := east.allocation(east.ns + "/web")
		return equalSet(al.GetEndpointNodes(), []string{"n1"}), fmt.Sprint(al.GetEndpointNodes())
	})

	members := func() int {
		resp, err := groups.GetGlobalGroup(ctx, &ipamv1.GetGlobalGroupRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.GetGlobalGroup().GetMembers())
	}
	if n := members(); n != 2 {
		t.Fatalf("group has %d members, want 2", n)
	}
	for _, e := range []*env{east, west} {
		if err := k8s.CoreV1().Services(e.ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the group to lose its members", func() (bool, string) {
		n := members()
		return n == 0, fmt.Sprint(n, " members")
	})
}
