package kube_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// endpoint is one endpoint of a slice: its node and readiness (nil: unknown,
// which counts as ready).
type endpoint struct {
	node  string
	ready *bool
}

func slice(ns, svc, name string, eps ...endpoint) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for i, ep := range eps {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("192.0.2.%d", i+1)},
			NodeName:   &ep.node,
			Conditions: discoveryv1.EndpointConditions{Ready: ep.ready},
		})
	}
	return es
}

func TestEndpointSlicesReachIPAM(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("main", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	e.start(nil)
	e.create(e.svc("local", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }))
	e.create(e.svc("cluster"))
	e.waitIPs("local", 1)
	e.waitIPs("cluster", 1)
	ctx := context.Background()
	slices := k8s.DiscoveryV1().EndpointSlices(e.ns)

	nodes := func(want ...string) {
		t.Helper()
		waitFor(t, fmt.Sprintf("endpoint nodes %v", want), func() (bool, string) {
			a := e.allocation(e.ns + "/local")
			return a.GetTrafficPolicy() == ipamv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL && equalSet(a.GetEndpointNodes(), want), fmt.Sprint(a.GetTrafficPolicy(), a.GetEndpointNodes())
		})
	}
	yes, no := true, false
	if _, err := slices.Create(ctx, slice(e.ns, "local", "local-a", endpoint{"n1", &yes}, endpoint{"n2", &no}, endpoint{"n3", nil}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes("n1", "n3")
	if _, err := slices.Create(ctx, slice(e.ns, "local", "local-b", endpoint{"n4", &yes}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes("n1", "n3", "n4")
	if _, err := slices.Update(ctx, slice(e.ns, "local", "local-a", endpoint{"n2", &yes}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes("n2", "n4")
	if err := slices.Delete(ctx, "local-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes("n2")

	// A Cluster Service sends no nodes, whatever its endpoints.
	if _, err := slices.Create(ctx, slice(e.ns, "cluster", "cluster-a", endpoint{"n1", &yes}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.never(e.ns+"/cluster", 2*time.Second, "the Cluster Service's allocation got nodes", func(a *ipamv1.Allocation) bool {
		return len(a.GetEndpointNodes()) != 0 || a.GetTrafficPolicy() == ipamv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
	})
	if a := e.allocation(e.ns + "/cluster"); len(a.GetEndpointNodes()) != 0 || a.GetTrafficPolicy() == ipamv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL {
		t.Errorf("cluster allocation: policy %v nodes %v", a.GetTrafficPolicy(), a.GetEndpointNodes())
	}
	// Switching it to Local sends its nodes.
	e.update("cluster", func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal })
	waitFor(t, "cluster to turn local", func() (bool, string) {
		a := e.allocation(e.ns + "/cluster")
		return a.GetTrafficPolicy() == ipamv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL && equalSet(a.GetEndpointNodes(), []string{"n1"}), fmt.Sprint(a)
	})
}

func equalSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestLeaderTakeover(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("main", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	le := func(id string) func(*kube.Config) {
		return func(c *kube.Config) {
			c.LeaderElection = kube.LeaderElection{
				Enabled: true, Namespace: e.ns, Name: "beacon-k8s-adapter", Identity: id,
				LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
			}
		}
	}
	a := e.start(le("a"))
	waitFor(t, "a to lead", func() (bool, string) { return a.c.Stats().Leading, "" })
	b := e.start(le("b"))
	e.create(e.svc("before"))
	e.waitIPs("before", 1)
	if b.c.Stats().Leading {
		t.Fatal("two leaders")
	}
	lease, err := k8s.CoordinationV1().Leases(e.ns).Get(context.Background(), "beacon-k8s-adapter", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "a" {
		t.Fatalf("lease: %v %v", lease, err)
	}

	// a stops (a rolling update): it gives the Lease up and b takes over
	// within a retry period.
	a.stop()
	start := time.Now()
	e.create(e.svc("after"))
	e.waitIPs("after", 1)
	took := time.Since(start)
	t.Logf("takeover: a Service created as the leader stopped got its address %v later", took)
	if took > 5*time.Second {
		t.Errorf("takeover took %v", took)
	}
	if !b.c.Stats().Leading {
		t.Error("b does not lead")
	}
}

func TestLeaderTakeoverAfterCrash(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("main", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	// A leader that died without giving the Lease up: its last renewal is
	// now, its lease 3 s.
	now := metav1.NewMicroTime(time.Now())
	dead, secs := "dead", int32(3)
	_, err := k8s.CoordinationV1().Leases(e.ns).Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "beacon-k8s-adapter", Namespace: e.ns},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &dead, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b := e.start(func(c *kube.Config) {
		c.LeaderElection = kube.LeaderElection{
			Enabled: true, Namespace: e.ns, Name: "beacon-k8s-adapter", Identity: "b",
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
		}
	})
	e.create(e.svc("waiting"))
	e.waitIPs("waiting", 1)
	took := time.Since(start)
	t.Logf("takeover from a dead leader with a 3 s lease: %v", took)
	if took < 2*time.Second || took > 6*time.Second || !b.c.Stats().Leading {
		t.Errorf("took %v (leading %v); want about the lease duration", took, b.c.Stats().Leading)
	}
}
