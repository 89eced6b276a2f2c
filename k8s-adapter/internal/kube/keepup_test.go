package kube_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// TestImportKeepsUp checks that a MetalLB pool the IPAM keeps refusing
// backs off on its own: with a back-off of ten minutes, a good pool applied
// after it and a Service asking for that pool get their address at once.
func TestImportKeepsUp(t *testing.T) {
	installCRDs(t)
	e := newEnv(t, nil)
	ctx := context.Background()
	mns := e.ns + "-metallb"
	if _, err := k8s.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A pool made outside the adapter: the MetalLB pool "bad" overlaps it.
	e.pool("blocker", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	t.Cleanup(func() {
		_, _ = ipam.Pools.DeletePool(context.Background(), &ipamv1.DeletePoolRequest{Name: "pools/" + e.tenant + "-good", Force: true})
	})
	e.start(func(c *kube.Config) {
		c.MetalLBNamespace = mns
		c.MetalLBBackoff = 10 * time.Minute
	})
	apply := func(yaml string) {
		t.Helper()
		if _, err := cluster.Kubectl(ctx, strings.NewReplacer("NS", mns, "BAD", e.v4(0), "GOOD", e.v4(1)).Replace(yaml), "apply", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	pools := dynamicClient(t).Resource(poolGVR).Namespace(mns)
	apply(`{apiVersion: metallb.io/v1beta1, kind: IPAddressPool, metadata: {name: bad, namespace: NS}, spec: {addresses: [BAD]}}`)
	waitRefused(t, pools, "bad", "PoolOverlap")

	apply(`{apiVersion: metallb.io/v1beta1, kind: IPAddressPool, metadata: {name: good, namespace: NS}, spec: {addresses: [GOOD], autoAssign: false}}`)
	e.create(e.svc("web", func(s *corev1.Service) { s.Annotations = map[string]string{"metallb.io/address-pool": "good"} }))
	if ip := e.waitIPs("web", 1)[0]; !inPrefix(t, ip, e.v4(1)) {
		t.Errorf("web got %s, want one of good's %s", ip, e.v4(1))
	}
	u, err := pools.Get(ctx, "bad", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); strings.Contains(fmt.Sprint(conds), "rpc error") {
		t.Errorf("bad's status carries transport text: %v", conds)
	}
}
