package kube_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/beaconlb/beacon/k8s-adapter/internal/reason"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// nth returns the i-th address of prefix.
func nth(t *testing.T, prefix string, i int) string {
	t.Helper()
	a := netip.MustParsePrefix(prefix).Addr()
	for range i {
		a = a.Next()
	}
	return a.String()
}

// setStatus writes a Service's status as MetalLB does: its ingress IPs.
func (e *env) setStatus(name string, ips ...string) {
	e.t.Helper()
	s, err := e.get(name)
	if err != nil {
		e.t.Fatal(err)
	}
	s.Status.LoadBalancer.Ingress = nil
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	if _, err := k8s.CoreV1().Services(e.ns).UpdateStatus(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("status of %s: %v", name, err)
	}
}

// A migration from MetalLB: Services whose status holds the address MetalLB
// gave them (and no annotation asking for it) keep it when the adapter
// starts, sharers included; only a conflict (the address is another's, in
// no pool, or in a pool the Service may not use) moves a Service, with an
// IPNotKept Event saying why.
func TestAdoptStatusAddresses(t *testing.T) {
	e := newEnv(t, nil)
	// main is the lower half of the test's /28, the upper half is in no
	// pool; other needs naming.
	lower := netip.MustParsePrefix(e.v4(0)).Addr().String() + "/29"
	main := e.pool("main", &ipamv1.Pool{Ranges: []string{lower}})
	other := e.pool("other", &ipamv1.Pool{Ranges: []string{e.v4(1)}, AutoAssign: new(false)})
	at := func(i int) string { return nth(t, e.v4(0), i) }

	// An incumbent the adapter allocated for before the switch.
	a := e.start(nil)
	e.create(e.svc("incumbent"))
	incumbent := e.waitIPs("incumbent", 1)
	a.stop()

	// What MetalLB left: Services with addresses in their status only.
	shared := func(port int32) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Annotations = map[string]string{"metallb.io/allow-shared-ip": "k"}
			s.Spec.Ports = []corev1.ServicePort{{Name: "p", Port: port, Protocol: corev1.ProtocolTCP}}
		}
	}
	for _, s := range []*corev1.Service{
		e.svc("kept"),
		e.svc("shared-a", shared(80)),
		e.svc("shared-b", shared(443)),
		e.svc("asks", func(s *corev1.Service) {
			s.Annotations = map[string]string{"metallb.io/loadBalancerIPs": at(7)}
		}),
		e.svc("dup"),
		e.svc("stray"),
		e.svc("wrong-pool", func(s *corev1.Service) {
			s.Annotations = map[string]string{"beacon.io/address-pool": other}
		}),
	} {
		e.create(s)
	}
	e.setStatus("kept", at(6))
	e.setStatus("shared-a", at(5))
	e.setStatus("shared-b", at(5))
	e.setStatus("asks", at(4))
	e.setStatus("dup", incumbent[0])
	e.setStatus("stray", at(12))     // in no pool
	e.setStatus("wrong-pool", at(3)) // in main, not the pool it names

	e.start(nil)
	want := map[string][]string{
		"incumbent": incumbent,
		"kept":      {at(6)},
		"shared-a":  {at(5)},
		"shared-b":  {at(5)},
		"asks":      {at(7)}, // the annotation wins over the status
	}
	for name, ips := range want {
		waitFor(t, name+" to be allocated "+fmt.Sprint(ips), func() (bool, string) {
			s, err := e.get(name)
			if err != nil {
				return false, err.Error()
			}
			a := e.allocation(e.ns + "/" + name)
			return cmp.Equal(ips, ingress(s)) && cmp.Equal(ips, a.GetAddresses()) && a.GetPool() == "pools/"+main,
				fmt.Sprint(ingress(s), a.GetAddresses(), a.GetPool())
		})
	}
	moved := map[string]struct {
		from, reason, prefix string
	}{
		"dup":        {incumbent[0], "AddressInUse", lower},
		"stray":      {at(12), "AddressNotInPool", lower},
		"wrong-pool": {at(3), "NotAllowed", e.v4(1)},
	}
	for name, m := range moved {
		var ips []string
		waitFor(t, name+" to move into "+m.prefix, func() (bool, string) {
			s, err := e.get(name)
			if err != nil {
				return false, err.Error()
			}
			ips = ingress(s)
			return len(ips) == 1 && ips[0] != m.from && inPrefix(t, ips[0], m.prefix), fmt.Sprint(ips)
		})
		msg := e.waitEvent(name, reason.IPNotKept)
		if !strings.Contains(msg, m.from) || !strings.Contains(msg, m.reason) || strings.Contains(msg, "rpc error") {
			t.Errorf("%s: IPNotKept message %q should name %s and %s, without transport text", name, msg, m.from, m.reason)
		}
		if ips[0] == at(5) || ips[0] == at(6) || ips[0] == at(7) {
			t.Errorf("%s moved to %s, an address another Service keeps", name, ips[0])
		}
	}
	if msg := e.waitEvent("kept", reason.IPAllocated); !strings.Contains(msg, "Kept") || !strings.Contains(msg, at(6)) {
		t.Errorf("kept: IPAllocated message %q should say the address was kept", msg)
	}
}
