package kube_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
	"github.com/beaconlb/beacon/k8s-adapter/internal/reason"
	"github.com/beaconlb/beacon/k8s-adapter/internal/request"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func inPrefix(t *testing.T, ip, prefix string) bool {
	t.Helper()
	return netip.MustParsePrefix(prefix).Contains(netip.MustParseAddr(ip))
}

func TestCreateGetsAddress(t *testing.T) {
	e := newEnv(t, map[string]string{"team": "blue"})
	pool := e.pool("main", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	e.start(nil)

	e.create(e.svc("web"))
	ips := e.waitIPs("web", 1)
	if !inPrefix(t, ips[0], e.v4(0)) {
		t.Fatalf("address %s not from pool %s", ips[0], e.v4(0))
	}
	var s *corev1.Service
	waitFor(t, "the finalizer and the pool annotation", func() (bool, string) {
		var err error
		if s, err = e.get("web"); err != nil {
			return false, err.Error()
		}
		return slices.Contains(s.Finalizers, kube.Finalizer) && s.Annotations[request.PoolAnnotation] != "", fmt.Sprint(s.Finalizers, s.Annotations)
	})
	if in := s.Status.LoadBalancer.Ingress[0]; in.IPMode == nil || *in.IPMode != corev1.LoadBalancerIPModeVIP {
		t.Errorf("ipMode = %v, want VIP", in.IPMode)
	}
	if got := s.Annotations[request.PoolAnnotation]; got != pool {
		t.Errorf("pool annotation = %q, want %q", got, pool)
	}
	if !slices.Contains(s.Finalizers, kube.Finalizer) {
		t.Errorf("finalizers = %v, want %s", s.Finalizers, kube.Finalizer)
	}
	if msg := e.waitEvent("web", reason.IPAllocated); !strings.Contains(msg, ips[0]) || !strings.Contains(msg, pool) {
		t.Errorf("event message %q does not name the address and pool", msg)
	}
	a := e.allocation(e.ns + "/web")
	want := &ipamv1.Allocation{
		Owner: e.ns + "/web", OwnerUid: string(s.UID), Namespace: e.ns,
		OwnerLabels: map[string]string{"app": "web"}, NamespaceLabels: map[string]string{"team": "blue", "kubernetes.io/metadata.name": e.ns},
		Addresses: ips, Pool: "pools/" + pool,
	}
	got := &ipamv1.Allocation{
		Owner: a.GetOwner(), OwnerUid: a.GetOwnerUid(), Namespace: a.GetNamespace(),
		OwnerLabels: a.GetOwnerLabels(), NamespaceLabels: a.GetNamespaceLabels(), Addresses: a.GetAddresses(), Pool: a.GetPool(),
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("allocation (-want +got):\n%s", diff)
	}

	// Idempotent: changing labels and ports re-reconciles without moving
	// the address; the allocation follows the labels.
	e.update("web", func(s *corev1.Service) {
		s.Labels["tier"] = "front"
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP})
	})
	waitFor(t, "labels to reach the IPAM", func() (bool, string) {
		a := e.allocation(e.ns + "/web")
		return a.GetOwnerLabels()["tier"] == "front" && len(a.GetPorts()) == 2, fmt.Sprint(a)
	})
	e.waitEvent("web", reason.AllocationUpdated)
	s, _ = e.get("web")
	if diff := cmp.Diff(ips, ingress(s)); diff != "" {
		t.Fatalf("address moved on re-reconcile (-want +got):\n%s", diff)
	}

	// Namespace labels follow too.
	nsObj, err := k8s.CoreV1().Namespaces().Get(context.Background(), e.ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["team"] = "red"
	if _, err := k8s.CoreV1().Namespaces().Update(context.Background(), nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "namespace labels to reach the IPAM", func() (bool, string) {
		a := e.allocation(e.ns + "/web")
		return a.GetNamespaceLabels()["team"] == "red", fmt.Sprint(a.GetNamespaceLabels())
	})
}

func TestDualStack(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("dual", &ipamv1.Pool{Ranges: []string{e.v4(0), e.v6(0)}})
	e.pool("v4only", &ipamv1.Pool{Ranges: []string{e.v4(1)}, AutoAssign: new(false)})
	e.start(nil)
	policy := func(p corev1.IPFamilyPolicy, fams ...corev1.IPFamily) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = &p, fams }
	}
	tests := []struct {
		name  string
		mod   func(*corev1.Service)
		want  []string // prefixes, in order
		fails string   // an IPAM reason in the failure Event
	}{
		{"single-v4", policy(corev1.IPFamilyPolicySingleStack, corev1.IPv4Protocol), []string{e.v4(0)}, ""},
		{"single-v6", policy(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol), []string{e.v6(0)}, ""},
		{"prefer-dual", policy(corev1.IPFamilyPolicyPreferDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol), []string{e.v4(0), e.v6(0)}, ""},
		{"require-dual-v6-first", policy(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv6Protocol, corev1.IPv4Protocol), []string{e.v6(0), e.v4(0)}, ""},
		{"prefer-dual-v4-pool", func(s *corev1.Service) {
			policy(corev1.IPFamilyPolicyPreferDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol)(s)
			s.Annotations = map[string]string{"beacon.io/address-pool": e.tenant + "-v4only"}
		}, []string{e.v4(1)}, ""},
		{"require-dual-v4-pool", func(s *corev1.Service) {
			policy(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol)(s)
			s.Annotations = map[string]string{"beacon.io/address-pool": e.tenant + "-v4only"}
		}, nil, "NotAllowed"},
	}
	for _, tt := range tests {
		e.create(e.svc(tt.name, tt.mod))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.fails != "" {
				msg := e.waitEvent(tt.name, reason.AllocationFailed)
				if !strings.Contains(msg, tt.fails) {
					t.Errorf("failure event %q does not carry %s", msg, tt.fails)
				}
				return
			}
			ips := e.waitIPs(tt.name, len(tt.want))
			for i, p := range tt.want {
				if !inPrefix(t, ips[i], p) {
					t.Errorf("address %d = %s, want one of %s (all: %v)", i, ips[i], p, ips)
				}
			}
		})
	}
}

func TestRequestedAddress(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("main", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	e.start(nil)
	base := netip.MustParsePrefix(e.v4(0)).Addr()
	addr := func(i int) string {
		a := base
		for range i {
			a = a.Next()
		}
		return a.String()
	}

	e.create(e.svc("by-annotation", func(s *corev1.Service) {
		s.Annotations = map[string]string{"metallb.io/loadBalancerIPs": addr(5)}
	}))
	e.create(e.svc("by-spec", func(s *corev1.Service) { s.Spec.LoadBalancerIP = addr(6) }))
	e.create(e.svc("deprecated", func(s *corev1.Service) {
		s.Annotations = map[string]string{"metallb.universe.tf/loadBalancerIPs": addr(7)}
	}))
	if diff := cmp.Diff([]string{addr(5)}, e.waitIPs("by-annotation", 1)); diff != "" {
		t.Errorf("by-annotation (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{addr(6)}, e.waitIPs("by-spec", 1)); diff != "" {
		t.Errorf("by-spec (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{addr(7)}, e.waitIPs("deprecated", 1)); diff != "" {
		t.Errorf("deprecated (-want +got):\n%s", diff)
	}
	e.waitEvent("deprecated", "DeprecatedAnnotation")

	// Taken: refused with the IPAM's reason, nothing in status.
	e.create(e.svc("taken", func(s *corev1.Service) {
		s.Annotations = map[string]string{"beacon.io/loadBalancerIPs": addr(5)}
	}))
	if msg := e.waitEvent("taken", reason.AllocationFailed); !strings.Contains(msg, "AddressInUse") || strings.Contains(msg, "rpc error") {
		t.Errorf("failure event %q does not carry AddressInUse", msg)
	}
	// Outside every pool.
	e.create(e.svc("outside", func(s *corev1.Service) {
		s.Annotations = map[string]string{"beacon.io/loadBalancerIPs": "198.19.255.1"}
	}))
	if msg := e.waitEvent("outside", reason.AllocationFailed); !strings.Contains(msg, "AddressNotInPool") {
		t.Errorf("failure event %q does not carry AddressNotInPool", msg)
	}
	// Invalid: an event, no allocation.
	e.create(e.svc("invalid", func(s *corev1.Service) {
		s.Annotations = map[string]string{"beacon.io/loadBalancerIPs": "not-an-ip"}
	}))
	e.waitEvent("invalid", "InvalidAnnotation")

	// Asking for another address moves the Service there.
	e.update("by-annotation", func(s *corev1.Service) { s.Annotations["metallb.io/loadBalancerIPs"] = addr(9) })
	waitFor(t, "by-annotation to move", func() (bool, string) {
		s, _ := e.get("by-annotation")
		return slices.Equal(ingress(s), []string{addr(9)}), fmt.Sprint(ingress(s))
	})
	if msg := e.waitEvent("by-annotation", reason.IPChanged); !strings.Contains(msg, addr(5)) || !strings.Contains(msg, addr(9)) {
		t.Errorf("change event %q", msg)
	}
	// ... which frees the old one for "taken", which retries by itself.
	if diff := cmp.Diff([]string{addr(5)}, e.waitIPs("taken", 1)); diff != "" {
		t.Errorf("taken after the address was freed (-want +got):\n%s", diff)
	}
}

func TestRequestedPool(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("auto", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	manual := e.pool("manual", &ipamv1.Pool{Ranges: []string{e.v4(1)}, AutoAssign: new(false)})
	e.start(nil)

	e.create(e.svc("default"))
	e.create(e.svc("named", func(s *corev1.Service) {
		s.Annotations = map[string]string{"beacon.io/address-pool": manual}
	}))
	e.create(e.svc("missing", func(s *corev1.Service) {
		s.Annotations = map[string]string{"beacon.io/address-pool": "no-such-pool"}
	}))
	if ip := e.waitIPs("default", 1)[0]; !inPrefix(t, ip, e.v4(0)) {
		t.Errorf("default got %s, want from %s", ip, e.v4(0))
	}
	if ip := e.waitIPs("named", 1)[0]; !inPrefix(t, ip, e.v4(1)) {
		t.Errorf("named got %s, want from %s", ip, e.v4(1))
	}
	e.waitEvent("missing", reason.AllocationFailed)

	// Moving a Service to another pool re-allocates it there.
	e.update("default", func(s *corev1.Service) {
		s.Annotations = map[string]string{"beacon.io/address-pool": manual}
	})
	waitFor(t, "default to move to the manual pool", func() (bool, string) {
		s, _ := e.get("default")
		ips := ingress(s)
		return len(ips) == 1 && inPrefix(t, ips[0], e.v4(1)) && s.Annotations[request.PoolAnnotation] == manual, fmt.Sprint(ips, s.Annotations)
	})
}

func TestSharing(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("main", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	e.start(nil)
	shared := func(key string, port int32, proto corev1.Protocol) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Annotations = map[string]string{"metallb.io/allow-shared-ip": key}
			s.Spec.Ports = []corev1.ServicePort{{Name: "p", Port: port, Protocol: proto}}
		}
	}
	e.create(e.svc("dns-tcp", shared("dns", 53, corev1.ProtocolTCP)))
	e.create(e.svc("dns-udp", shared("dns", 53, corev1.ProtocolUDP)))
	a, b := e.waitIPs("dns-tcp", 1), e.waitIPs("dns-udp", 1)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("sharers got different addresses (-tcp +udp):\n%s", diff)
	}
	// Same key, clashing port: a new address (MetalLB gives a different
	// one when the shared one cannot take it).
	e.create(e.svc("dns-tcp-2", shared("dns", 53, corev1.ProtocolTCP)))
	if c := e.waitIPs("dns-tcp-2", 1); c[0] == a[0] {
		t.Fatalf("clashing sharer got the shared address %s", c[0])
	}
	// Asking for the shared address with a clashing port is refused.
	e.create(e.svc("clash", func(s *corev1.Service) {
		shared("dns", 53, corev1.ProtocolUDP)(s)
		s.Annotations["metallb.io/loadBalancerIPs"] = a[0]
	}))
	if msg := e.waitEvent("clash", reason.AllocationFailed); !strings.Contains(msg, "AddressInUse") {
		t.Errorf("failure event %q does not carry AddressInUse", msg)
	}
	// Changing the sharing key re-allocates away from the shared address.
	e.update("dns-udp", func(s *corev1.Service) { s.Annotations["metallb.io/allow-shared-ip"] = "other" })
	waitFor(t, "dns-udp to leave the shared address", func() (bool, string) {
		s, _ := e.get("dns-udp")
		ips := ingress(s)
		return len(ips) == 1 && ips[0] != a[0], fmt.Sprint(ips)
	})
}

func TestClassFiltering(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("main", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	e.start(nil) // class e.class, unclassed Services not taken
	other := "other.io/lb"
	e.create(e.svc("ours"))
	e.create(e.svc("theirs", func(s *corev1.Service) { s.Spec.LoadBalancerClass = &other }))
	e.create(e.svc("unclassed", func(s *corev1.Service) { s.Spec.LoadBalancerClass = nil }))
	e.create(e.svc("cluster-ip", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP; s.Spec.LoadBalancerClass = nil }))
	ours := e.waitIPs("ours", 1)

	// A second adapter (tenant of its own) that takes unclassed Services.
	e2 := *e
	e2.tenant = e.tenant + "x"
	e2.pool("main", &ipamv1.Pool{Ranges: []string{e.v4(1)}})
	e2.start(func(c *kube.Config) { c.Filter = request.Filter{Class: "beacon.io/lb", AlsoUnclassed: true} })
	if ip := e.waitIPs("unclassed", 1)[0]; !inPrefix(t, ip, e.v4(1)) {
		t.Errorf("unclassed got %s, want from the second adapter's pool %s", ip, e.v4(1))
	}
	for _, name := range []string{"theirs", "cluster-ip"} {
		s, _ := e.get(name)
		if len(ingress(s)) != 0 || len(s.Finalizers) != 0 {
			t.Errorf("%s was touched: ingress %v, finalizers %v", name, ingress(s), s.Finalizers)
		}
	}
	if e.allocation(e.ns+"/theirs") != nil {
		t.Errorf("theirs has an allocation")
	}

	// spec.loadBalancerClass is immutable: a Service leaves the class by
	// leaving type LoadBalancer. That releases, clears status, removes the
	// finalizer and the annotation.
	e.update("ours", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.LoadBalancerClass = nil
	})
	waitFor(t, "ours to be let go", func() (bool, string) {
		s, _ := e.get("ours")
		return len(ingress(s)) == 0 && len(s.Finalizers) == 0 && s.Annotations[request.PoolAnnotation] == "", fmt.Sprint(ingress(s), s.Finalizers, s.Annotations)
	})
	if e.allocation(e.ns+"/ours") != nil {
		t.Errorf("ours still holds an allocation: %v", e.allocation(e.ns+"/ours"))
	}
	if msg := e.waitEvent("ours", reason.IPReleased); !strings.Contains(msg, ours[0]) {
		t.Errorf("release event %q does not name %s", msg, ours[0])
	}
}

func TestDeleteAndTypeChangeRelease(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("main", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	e.start(nil)
	e.create(e.svc("doomed"))
	e.create(e.svc("demoted"))
	doomed := e.waitIPs("doomed", 1)
	e.waitIPs("demoted", 1)

	if err := k8s.CoreV1().Services(e.ns).Delete(context.Background(), "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "doomed to be gone", func() (bool, string) {
		_, err := e.get("doomed")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if a := e.allocation(e.ns + "/doomed"); a != nil {
		t.Errorf("doomed still holds %v", a.GetAddresses())
	}
	// The IPAM holds a released Service's addresses for it for a while: the
	// same Service created again gets them back (MetalLB cannot).
	e.create(e.svc("doomed"))
	if diff := cmp.Diff(doomed, e.waitIPs("doomed", 1)); diff != "" {
		t.Errorf("doomed created again (-before +after):\n%s", diff)
	}

	e.update("demoted", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.LoadBalancerClass = nil
		s.Spec.Ports[0].NodePort = 0
		s.Spec.AllocateLoadBalancerNodePorts = nil
	})
	waitFor(t, "demoted to be let go", func() (bool, string) {
		s, _ := e.get("demoted")
		return len(ingress(s)) == 0 && len(s.Finalizers) == 0, fmt.Sprint(ingress(s), s.Finalizers)
	})
	if a := e.allocation(e.ns + "/demoted"); a != nil {
		t.Errorf("demoted still holds %v", a.GetAddresses())
	}
}

func TestReleasedWhileAdapterDown(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("main", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	a := e.start(nil)
	for _, n := range []string{"keep", "deleted", "stripped", "demoted"} {
		e.create(e.svc(n))
	}
	kept := e.waitIPs("keep", 1)
	for _, n := range []string{"deleted", "stripped", "demoted"} {
		e.waitIPs(n, 1)
	}
	a.stop()

	ctx := context.Background()
	// Deleted normally: held back by the finalizer until the adapter
	// returns.
	if err := k8s.CoreV1().Services(e.ns).Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Deleted with the finalizer stripped by hand: gone at once; only the
	// resync against the IPAM's list can find its allocation.
	if err := k8s.CoreV1().Services(e.ns).Delete(ctx, "stripped", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := k8s.CoreV1().Services(e.ns).Patch(ctx, "stripped", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.update("demoted", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeClusterIP
		s.Spec.LoadBalancerClass = nil
		s.Spec.Ports[0].NodePort = 0
		s.Spec.AllocateLoadBalancerNodePorts = nil
	})
	if s, err := e.get("deleted"); err != nil || s.DeletionTimestamp == nil {
		t.Fatalf("deleted should wait for the finalizer: %v %v", s, err)
	}

	e.start(nil)
	waitFor(t, "every leftover to be released", func() (bool, string) {
		var held []string
		for _, n := range []string{"deleted", "stripped", "demoted"} {
			if e.allocation(e.ns+"/"+n) != nil {
				held = append(held, n)
			}
		}
		_, err := e.get("deleted")
		return len(held) == 0 && apierrors.IsNotFound(err), fmt.Sprint(held, err)
	})
	s, _ := e.get("keep")
	if diff := cmp.Diff(kept, ingress(s)); diff != "" {
		t.Errorf("keep's address changed over the restart (-want +got):\n%s", diff)
	}
}

// A change made in the IPAM behind the adapter's back reaches the Service
// at once (the adapter follows WatchAllocations), not at its next event or
// resync: a pool deleted with force moves the Service to another pool, and
// when no pool is left its status is cleared, so that it does not advertise
// an address the IPAM may give to someone else.
func TestIPAMChangesReachService(t *testing.T) {
	e := newEnv(t, nil)
	first := e.pool("a", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	second := e.pool("b", &ipamv1.Pool{Ranges: []string{e.v4(1)}})
	e.start(nil)
	e.create(e.svc("web"))
	if ips := e.waitIPs("web", 1); !inPrefix(t, ips[0], e.v4(0)) {
		t.Fatalf("address %s not from the first pool %s", ips[0], e.v4(0))
	}

	forceDelete := func(id string) {
		t.Helper()
		if _, err := ipam.Pools.DeletePool(context.Background(), &ipamv1.DeletePoolRequest{Name: "pools/" + id, Force: true}); err != nil {
			t.Fatalf("delete pool %s: %v", id, err)
		}
	}
	forceDelete(first)
	waitFor(t, "the Service to move to the second pool", func() (bool, string) {
		s, err := e.get("web")
		if err != nil {
			return false, err.Error()
		}
		ips := ingress(s)
		return len(ips) == 1 && inPrefix(t, ips[0], e.v4(1)), fmt.Sprint(ips)
	})

	forceDelete(second)
	waitFor(t, "the Service's status to be cleared", func() (bool, string) {
		s, err := e.get("web")
		if err != nil {
			return false, err.Error()
		}
		return len(ingress(s)) == 0, fmt.Sprint(ingress(s))
	})
	e.waitEvent("web", reason.AllocationFailed)
}
