package kube_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// orderPools are MetalLB IPAddressPools whose answer depends on order: high
// (priority 5, four addresses) fills before low (priority 10), named is
// taken only by name. NS is the Services' namespace; HIGH, LOW, NAMED the
// ranges.
const orderPools = `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: high}
spec:
  addresses: [HIGH]
  serviceAllocation: {priority: 5, namespaces: [NS]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: low}
spec:
  addresses: [LOW]
  serviceAllocation: {priority: 10, namespaces: [NS]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: named}
spec:
  addresses: [NAMED]
  autoAssign: false
`

// orderServices are created in this order (which is also their names'
// order): b-dns-tcp and d-dns-clash want one shared address with clashing
// ports, so the older one must win it; the auto ones overflow from high
// into low.
func orderServices(e *env) []*corev1.Service {
	share := func(proto corev1.Protocol) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Annotations = map[string]string{"metallb.io/allow-shared-ip": "dns"}
			s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: proto}}
		}
	}
	return []*corev1.Service{
		e.svc("a-web"),
		e.svc("b-dns-tcp", share(corev1.ProtocolTCP)),
		e.svc("c-dns-udp", share(corev1.ProtocolUDP)),
		e.svc("d-dns-clash", share(corev1.ProtocolTCP)),
		e.svc("e-named", func(s *corev1.Service) { s.Annotations = map[string]string{"metallb.io/address-pool": "named"} }),
		e.svc("f-auto"),
		e.svc("g-auto"),
		e.svc("h-auto"),
	}
}

// orderRun is one application of the pools and Services to a fresh
// tenant, namespace and adapter; it returns each Service's addresses.
type orderRun struct {
	t        *testing.T
	e        *env
	mns      string
	ranges   [3]string // high, low, named
	pools    []*unstructured.Unstructured
	services []*corev1.Service
}

func newOrderRun(t *testing.T, ranges [3]string) *orderRun {
	e := newEnv(t, nil)
	mns := e.ns + "-metallb"
	if _, err := k8s.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer("NS", e.ns, "HIGH", ranges[0], "LOW", ranges[1], "NAMED", ranges[2])
	var pools []*unstructured.Unstructured
	for doc := range strings.SplitSeq(r.Replace(orderPools), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetNamespace(mns)
		pools = append(pools, u)
	}
	t.Cleanup(func() {
		// Pools are global in the IPAM: drop this run's (after its adapter
		// stopped: cleanups run last first), so the next run can have the
		// same ranges.
		for _, p := range []string{"high", "low", "named"} {
			_, _ = ipam.Pools.DeletePool(context.Background(), &ipamv1.DeletePoolRequest{Name: "pools/" + e.tenant + "-" + p, Force: true})
		}
	})
	return &orderRun{t: t, e: e, mns: mns, ranges: ranges, pools: pools, services: orderServices(e)}
}

var poolGVR = schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}

func (r *orderRun) createPool(u *unstructured.Unstructured) {
	r.t.Helper()
	if _, err := dynamicClient(r.t).Resource(poolGVR).Namespace(r.mns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		r.t.Fatalf("create pool %s: %v", u.GetName(), err)
	}
}

func (r *orderRun) start() {
	r.e.start(func(c *kube.Config) {
		c.MetalLBNamespace = r.mns
		// Generous for a loaded machine: every object of a run is created
		// within this of the one before.
		c.MetalLBSettle = time.Second
	})
}

// oneAfterAnother applies the pools, waits until they are imported, then
// creates each Service and waits for its addresses before the next.
func (r *orderRun) oneAfterAnother() map[string][]string {
	r.start()
	for _, p := range r.pools {
		r.createPool(p)
	}
	waitFor(r.t, "the pools in the IPAM", func() (bool, string) {
		resp, err := ipam.Pools.ListPools(context.Background(), &ipamv1.ListPoolsRequest{Filter: fmt.Sprintf("tenant = %q", r.e.tenant)})
		return err == nil && len(resp.GetPools()) == 3, fmt.Sprint(resp.GetPools(), err)
	})
	got := map[string][]string{}
	for _, s := range r.services {
		r.e.create(s)
		got[s.Name] = r.e.waitIPs(s.Name, 1)
	}
	return got
}

// together creates the pools at random places among the Services (whose
// order stays), a random 0-40 ms apart, then waits for every Service's
// addresses.
func (r *orderRun) together(rng *rand.Rand) (map[string][]string, []string) {
	r.start()
	type step struct {
		name string
		do   func()
	}
	var steps []step
	for _, s := range r.services {
		steps = append(steps, step{"svc/" + s.Name, func() { r.e.create(s) }})
	}
	for _, p := range r.pools {
		at := rng.IntN(len(steps) + 1)
		steps = slices.Insert(steps, at, step{"pool/" + p.GetName(), func() { r.createPool(p) }})
	}
	var order []string
	for _, s := range steps {
		order = append(order, s.name)
		s.do()
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond) // the timing under test, not a wait for a condition
	}
	got := map[string][]string{}
	for _, s := range r.services {
		got[s.Name] = r.e.waitIPs(s.Name, 1)
	}
	return got, order
}

// Applying MetalLB pools and Services together, in any interleaving and
// timing, gives exactly the addresses of applying the pools first and then
// the Services one after another.
func TestOrderIndependence(t *testing.T) {
	installCRDs(t)
	base := newEnv(t, nil) // for its address blocks only
	lower := netip.MustParsePrefix(base.v4(0)).Addr()
	ranges := [3]string{
		lower.String() + "-" + nth(t, base.v4(0), 3),         // high: 4 addresses
		nth(t, base.v4(0), 8) + "-" + nth(t, base.v4(0), 15), // low: 8 addresses
		base.v4(1), // named
	}

	var want map[string][]string
	t.Run("one-after-another", func(t *testing.T) {
		want = newOrderRun(t, ranges).oneAfterAnother()
	})
	if want == nil {
		t.FailNow()
	}
	// The scenario means something: priority, sharing and names decide.
	inRange := func(ip, rng string) bool {
		lo, hi, _ := strings.Cut(rng, "-")
		a := netip.MustParseAddr(ip)
		if hi == "" {
			return netip.MustParsePrefix(lo).Contains(a)
		}
		return netip.MustParseAddr(lo).Compare(a) <= 0 && a.Compare(netip.MustParseAddr(hi)) <= 0
	}
	for name, rng := range map[string]string{"a-web": ranges[0], "b-dns-tcp": ranges[0], "e-named": ranges[2], "h-auto": ranges[1]} {
		if !inRange(want[name][0], rng) {
			t.Errorf("one after another: %s got %v, not in %s", name, want[name], rng)
		}
	}
	if !cmp.Equal(want["b-dns-tcp"], want["c-dns-udp"]) || cmp.Equal(want["b-dns-tcp"], want["d-dns-clash"]) {
		t.Errorf("one after another: sharing went wrong: %v", want)
	}
	t.Logf("one after another: %v", want)

	const runs = 6
	for i := range runs {
		seed := uint64(time.Now().UnixNano())
		t.Run(fmt.Sprintf("together-%d", i), func(t *testing.T) {
			got, order := newOrderRun(t, ranges).together(rand.New(rand.NewPCG(seed, uint64(i))))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("applied as %v (seed %d): addresses differ from one after another (-want +got):\n%s", order, seed, diff)
			}
		})
	}
}
