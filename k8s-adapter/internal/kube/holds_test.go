package kube_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/beaconlb/beacon/k8s-adapter/internal/reason"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// TestHolds checks release holds as a migrating MetalLB user meets them: a
// Service managed through MetalLB's annotations frees its address at once
// when deleted (as MetalLB does) unless it opts in with
// beacon.io/release-hold; a Service whose address is held waits with an
// Event naming the hold, whose it was and when it ends; the hold is listed
// by the IPAM (beaconctl alloc list --held) and ended by releasing the
// deleted owner (beaconctl alloc release), after which the waiting Service
// gets the address.
func TestHolds(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("main", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	e.start(nil)
	base := netip.MustParsePrefix(e.v4(0)).Addr()
	at := func(i int) string {
		a := base
		for range i {
			a = a.Next()
		}
		return a.String()
	}
	asks := func(key, addr string, more ...string) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Annotations = map[string]string{key: addr}
			for i := 0; i+1 < len(more); i += 2 {
				s.Annotations[more[i]] = more[i+1]
			}
		}
	}
	ctx := context.Background()
	del := func(name string) {
		t.Helper()
		if err := k8s.CoreV1().Services(e.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, name+" to be gone", func() (bool, string) {
			_, err := e.get(name)
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}

	// MetalLB's annotation: free at once.
	e.create(e.svc("mlb", asks("metallb.io/loadBalancerIPs", at(3))))
	e.waitIPs("mlb", 1)
	del("mlb")
	e.create(e.svc("mlb-next", asks("metallb.io/loadBalancerIPs", at(3))))
	if diff := cmp.Diff([]string{at(3)}, e.waitIPs("mlb-next", 1)); diff != "" {
		t.Errorf("mlb-next (-want +got):\n%s", diff)
	}

	// Opted in: held; so is a Service not managed through MetalLB (the
	// IPAM's default hold).
	e.create(e.svc("mlb-held", asks("metallb.io/loadBalancerIPs", at(4), "beacon.io/release-hold", "1h")))
	e.create(e.svc("native", asks("beacon.io/loadBalancerIPs", at(5))))
	e.waitIPs("mlb-held", 1)
	e.waitIPs("native", 1)
	del("mlb-held")
	del("native")
	held, err := ipam.Allocations.ListAllocations(ctx, &ipamv1.ListAllocationsRequest{Parent: "tenants/" + e.tenant, Held: true})
	if err != nil {
		t.Fatal(err)
	}
	var owners []string
	for _, a := range held.GetAllocations() {
		owners = append(owners, a.GetOwner())
	}
	if diff := cmp.Diff([]string{e.ns + "/mlb-held", e.ns + "/native"}, owners, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("holds (-want +got):\n%s", diff)
	}

	// The waiting Service is told whose hold it waits for and until when.
	e.create(e.svc("waiting", asks("beacon.io/loadBalancerIPs", at(5))))
	msg := e.waitEvent("waiting", reason.AllocationFailed)
	for _, want := range []string{reason.AddressHeld, at(5), e.ns + "/native", "beaconctl alloc release " + e.ns + "/native --tenant " + e.tenant} {
		if !strings.Contains(msg, want) {
			t.Errorf("event %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "rpc error") {
		t.Errorf("event %q carries transport text", msg)
	}
	// Ending the hold (what beaconctl alloc release does) lets it through.
	if _, err := ipam.Allocations.Release(ctx, &ipamv1.ReleaseRequest{Parent: "tenants/" + e.tenant, Owner: e.ns + "/native"}); err != nil {
		t.Fatalf("end the hold: %v", err)
	}
	if diff := cmp.Diff([]string{at(5)}, e.waitIPs("waiting", 1)); diff != "" {
		t.Errorf("waiting (-want +got):\n%s", diff)
	}
}
