package kube_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/beaconlb/beacon/k8s-adapter/internal/reason"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// beacon.io/address-count: N gets the Service N addresses (active-active
// L2), all listed in its status; with allow-shared-ip it is refused with
// an event and nothing is allocated.
func TestSeveralAddresses(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("main", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	e.start(nil)

	e.create(e.svc("web", func(s *corev1.Service) {
		s.Annotations = map[string]string{"beacon.io/address-count": "3"}
	}))
	ips := e.waitIPs("web", 3)
	if len(slices.Compact(slices.Sorted(slices.Values(ips)))) != 3 {
		t.Fatalf("status lists %v, want three distinct addresses", ips)
	}
	for _, ip := range ips {
		if !inPrefix(t, ip, e.v4(0)) {
			t.Errorf("address %s not from pool %s", ip, e.v4(0))
		}
	}
	a := e.allocation(e.ns + "/web")
	if a.GetAddressCount() != 3 {
		t.Errorf("allocation address_count = %d, want 3", a.GetAddressCount())
	}
	if diff := cmp.Diff(a.GetAddresses(), ips); diff != "" {
		t.Errorf("status against the allocation (-allocation +status):\n%s", diff)
	}

	// Re-reconciled (a label change), the Service keeps its addresses, and
	// the adapter does not try to pin them as status addresses (one per
	// family only): no IPNotKept warning.
	e.update("web", func(s *corev1.Service) { s.Labels["tier"] = "front" })
	waitFor(t, "labels to reach the IPAM", func() (bool, string) {
		a := e.allocation(e.ns + "/web")
		return a.GetOwnerLabels()["tier"] == "front", fmt.Sprint(a.GetOwnerLabels())
	})
	e.waitEvent("web", reason.AllocationUpdated)
	if s, err := e.get("web"); err != nil || !slices.Equal(ingress(s), ips) {
		t.Errorf("after a label change: status %v (%v), want %v", ingress(s), err, ips)
	}
	evs, err := k8s.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		if ev.Reason == reason.IPNotKept {
			t.Errorf("event %s: %s", ev.Reason, ev.Message)
		}
	}

	e.create(e.svc("shared", func(s *corev1.Service) {
		s.Annotations = map[string]string{"beacon.io/address-count": "2", "beacon.io/allow-shared-ip": "k"}
	}))
	e.waitEvent("shared", reason.InvalidAnnotation)
	s, err := e.get("shared")
	if err != nil {
		t.Fatal(err)
	}
	if got := ingress(s); len(got) != 0 {
		t.Errorf("shared: status lists %v, want nothing", got)
	}
}
