package kube_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
	"github.com/beaconlb/beacon/k8s-adapter/internal/testenv"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

var crdsOnce sync.Once

// installCRDs applies deploy/k8s/crds with kubectl, once per test binary,
// and waits until they are served.
func installCRDs(t *testing.T) {
	t.Helper()
	var err error
	crdsOnce.Do(func() {
		root, rerr := testenv.RepoRoot()
		if rerr != nil {
			err = rerr
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err = cluster.Kubectl(ctx, "", "apply", "-f", filepath.Join(root, "deploy", "k8s", "crds")); err != nil {
			return
		}
		_, err = cluster.Kubectl(ctx, "", "wait", "--for=condition=Established", "--timeout=60s",
			"crd/ipaddresspools.metallb.io", "crd/l2advertisements.metallb.io", "crd/bgpadvertisements.metallb.io",
			"crd/bgppeers.metallb.io", "crd/bfdprofiles.metallb.io", "crd/communities.metallb.io")
	})
	if err != nil {
		t.Fatal(err)
	}
}

// MetalLB's documented examples (metallb.io/configuration), with the
// namespace of the test. first-pool's IPv4 ranges are listed lowest first:
// then MetalLB (first free address in the order listed) and Beacon (lowest
// free address) agree.
const metallbManifests = `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: first-pool
  namespace: NS
spec:
  addresses:
  - 192.0.2.1-192.0.2.5
  - 198.51.100.0/24
  - 2001:db8:e799::/124
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: production
  namespace: NS
  labels:
    zone: east
spec:
  addresses:
  - 203.0.113.0/28
  autoAssign: false
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata:
  name: example
  namespace: NS
spec:
  ipAddressPools:
  - first-pool
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata:
  name: by-label
  namespace: NS
spec:
  ipAddressPoolSelectors:
  - matchLabels:
      zone: east
  interfaces:
  - eth0
---
apiVersion: metallb.io/v1beta1
kind: BFDProfile
metadata:
  name: full
  namespace: NS
spec:
  receiveInterval: 380
  transmitInterval: 270
  echoInterval: 62
  echoMode: true
  passiveMode: true
  minimumTtl: 254
---
apiVersion: metallb.io/v1beta1
kind: Community
metadata:
  name: communities
  namespace: NS
spec:
  communities:
  - name: vpn-only
    value: 1234:1
---
apiVersion: v1
kind: Secret
metadata:
  name: bgp-secret
  namespace: NS
type: kubernetes.io/basic-auth
stringData:
  password: s3cr3t
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata:
  name: sample
  namespace: NS
spec:
  myASN: 64500
  peerASN: 64501
  peerAddress: 203.0.113.201
  bfdProfile: full
  holdTime: 90s
  passwordSecret:
    name: bgp-secret
    namespace: NS
---
apiVersion: metallb.io/v1beta1
kind: BGPPeer
metadata:
  name: old-style
  namespace: NS
spec:
  myASN: 64500
  peerASN: 64502
  peerAddress: 203.0.113.202
  nodeSelectors:
  - matchLabels:
      rack: r1
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata:
  name: local
  namespace: NS
spec:
  ipAddressPools:
  - first-pool
  aggregationLength: 32
  localPref: 100
  communities:
  - vpn-only
  peers:
  - sample
`

func TestMetalLBManifests(t *testing.T) {
	installCRDs(t)
	e := newEnv(t, nil)
	mns := e.ns + "-metallb"
	if _, err := k8s.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if out, err := cluster.Kubectl(ctx, strings.ReplaceAll(metallbManifests, "NS", mns), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	} else {
		t.Log(out)
	}
	t.Cleanup(func() {
		// Pools are global in the IPAM: drop this test's.
		for _, p := range []string{"first-pool", "production", "overlap"} {
			_, _ = ipam.Pools.DeletePool(context.Background(), &ipamv1.DeletePoolRequest{Name: "pools/" + e.tenant + "-" + p, Force: true})
		}
	})
	e.start(func(c *kube.Config) { c.MetalLBNamespace = mns; c.MetalLBResync = time.Second })

	// The IPAM got pools for the tenant, and the announcement config.
	waitFor(t, "pools in the IPAM", func() (bool, string) {
		r, err := ipam.Pools.ListPools(ctx, &ipamv1.ListPoolsRequest{Filter: fmt.Sprintf("tenant = %q", e.tenant)})
		var names []string
		for _, p := range r.GetPools() {
			names = append(names, p.GetName())
		}
		return err == nil && slices.Contains(names, "pools/"+e.tenant+"-first-pool") && slices.Contains(names, "pools/"+e.tenant+"-production"), fmt.Sprint(names, err)
	})
	p, err := ipam.Pools.GetPool(ctx, &ipamv1.GetPoolRequest{Name: "pools/" + e.tenant + "-production"})
	if err != nil {
		t.Fatal(err)
	}
	if p.GetPool().GetAutoAssign() || !slices.Equal(p.GetPool().GetTenants(), []string{e.tenant}) || p.GetPool().GetLabels()["zone"] != "east" {
		t.Errorf("production pool: %v", p.GetPool())
	}
	parent := "tenants/" + e.tenant
	waitFor(t, "announcement config in the IPAM", func() (bool, string) {
		l2, err1 := ipam.Announcements.ListL2Advertisements(ctx, &ipamv1.ListL2AdvertisementsRequest{Parent: parent})
		bgp, err2 := ipam.Announcements.ListBGPAdvertisements(ctx, &ipamv1.ListBGPAdvertisementsRequest{Parent: parent})
		peers, err3 := ipam.Announcements.ListBGPPeers(ctx, &ipamv1.ListBGPPeersRequest{Parent: parent})
		bfd, err4 := ipam.Announcements.ListBFDProfiles(ctx, &ipamv1.ListBFDProfilesRequest{Parent: parent})
		com, err5 := ipam.Announcements.ListCommunities(ctx, &ipamv1.ListCommunitiesRequest{Parent: parent})
		n := []int{len(l2.GetL2Advertisements()), len(bgp.GetBgpAdvertisements()), len(peers.GetBgpPeers()), len(bfd.GetBfdProfiles()), len(com.GetCommunities())}
		return slices.Equal(n, []int{2, 1, 2, 1, 1}), fmt.Sprint(n, err1, err2, err3, err4, err5)
	})
	peer, err := ipam.Announcements.GetBGPPeer(ctx, &ipamv1.GetBGPPeerRequest{Name: parent + "/bgpPeers/mlb-sample"})
	if err != nil {
		t.Fatal(err)
	}
	if g := peer.GetBgpPeer(); g.GetPeerAsn() != 64501 || g.GetBfdProfile() != "mlb-full" || !g.GetHasPassword() || g.GetHoldTime().AsDuration() != 90*time.Second {
		t.Errorf("peer sample: %v", g)
	}
	adv, err := ipam.Announcements.GetBGPAdvertisement(ctx, &ipamv1.GetBGPAdvertisementRequest{Name: parent + "/bgpAdvertisements/mlb-local"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"pools/" + e.tenant + "-first-pool"}, adv.GetBgpAdvertisement().GetPools()); diff != "" {
		t.Errorf("bgp advertisement pools (-want +got):\n%s", diff)
	}

	// Services as in MetalLB's docs, with the results MetalLB gives.
	shared := func(ip string, port int32, proto corev1.Protocol) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Annotations = map[string]string{"metallb.io/allow-shared-ip": "key-to-share-" + ip, "metallb.io/loadBalancerIPs": ip}
			s.Spec.Ports = []corev1.ServicePort{{Name: "p", Port: port, Protocol: proto}}
		}
	}
	e.create(e.svc("nginx", func(s *corev1.Service) {
		s.Annotations = map[string]string{"metallb.io/address-pool": "production"}
	}))
	e.create(e.svc("fixed", func(s *corev1.Service) {
		s.Annotations = map[string]string{"metallb.io/loadBalancerIPs": "198.51.100.100"}
	}))
	e.create(e.svc("dns-tcp", shared("198.51.100.50", 53, corev1.ProtocolTCP)))
	e.create(e.svc("dns-udp", shared("198.51.100.50", 53, corev1.ProtocolUDP)))
	e.create(e.svc("auto"))
	dual := corev1.IPFamilyPolicyPreferDualStack
	e.create(e.svc("dual", func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = &dual
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	}))
	want := map[string][]string{
		"nginx":   {"203.0.113.0"},
		"fixed":   {"198.51.100.100"},
		"dns-tcp": {"198.51.100.50"},
		"dns-udp": {"198.51.100.50"},
	}
	for name, ips := range want {
		if diff := cmp.Diff(ips, e.waitIPs(name, len(ips))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	// MetalLB's annotation names the IPAddressPool, as MetalLB writes it.
	waitFor(t, "nginx's ip-allocated-from-pool annotation", func() (bool, string) {
		s, err := e.get("nginx")
		if err != nil {
			return false, err.Error()
		}
		got := s.Annotations["metallb.universe.tf/ip-allocated-from-pool"]
		return got == "production", got
	})
	autoIP := e.waitIPs("auto", 1)[0]
	dualIPs := e.waitIPs("dual", 2)
	// auto and dual take the two lowest free IPv4 addresses of first-pool
	// (production is not auto-assigned), dual the pool's first IPv6.
	if got := []string{autoIP, dualIPs[0]}; !equalSet(got, []string{"192.0.2.1", "192.0.2.2"}) {
		t.Errorf("auto and dual IPv4 = %v, want 192.0.2.1 and 192.0.2.2", got)
	}
	if dualIPs[1] != "2001:db8:e799::" {
		t.Errorf("dual IPv6 = %s, want 2001:db8:e799::", dualIPs[1])
	}

	// Status written back: pool usage and Synced.
	dyn := dynamicClient(t)
	pools := dyn.Resource(schema.GroupVersionResource{Group: "metallb.io", Version: "v1beta1", Resource: "ipaddresspools"}).Namespace(mns)
	waitFor(t, "production's usage in its status", func() (bool, string) {
		u, err := pools.Get(ctx, "production", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		assigned, _, _ := unstructured.NestedInt64(u.Object, "status", "assignedIPv4")
		avail, _, _ := unstructured.NestedInt64(u.Object, "status", "availableIPv4")
		return assigned == 1 && avail == 15 && syncedIs(u, "True"), fmt.Sprint(u.Object["status"])
	})

	// An overlapping pool is refused, with the reason in its status and an
	// Event.
	if _, err := cluster.Kubectl(ctx, strings.ReplaceAll(`
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: overlap, namespace: NS}
spec:
  addresses: [203.0.113.8/29]
`, "NS", mns), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	waitRefused(t, pools, "overlap", "PoolOverlap")
	waitFor(t, "an ImportFailed event on overlap", func() (bool, string) {
		evs, err := k8s.CoreV1().Events(mns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=overlap"})
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range evs.Items {
			if ev.Reason == "ImportFailed" {
				return true, ""
			}
		}
		return false, fmt.Sprint(len(evs.Items), " events")
	})

	// Growing a pool reaches the IPAM; deleting an advertisement removes it.
	if _, err := cluster.Kubectl(ctx, "", "-n", mns, "patch", "ipaddresspool", "production", "--type=merge", "-p", `{"spec":{"addresses":["203.0.113.0/28","203.0.113.16/28"]}}`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "production to grow", func() (bool, string) {
		p, err := ipam.Pools.GetPool(ctx, &ipamv1.GetPoolRequest{Name: "pools/" + e.tenant + "-production"})
		return err == nil && len(p.GetPool().GetRanges()) == 2, fmt.Sprint(p.GetPool().GetRanges(), err)
	})
	if _, err := cluster.Kubectl(ctx, "", "-n", mns, "delete", "l2advertisement", "by-label"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "by-label to leave the IPAM", func() (bool, string) {
		l2, err := ipam.Announcements.ListL2Advertisements(ctx, &ipamv1.ListL2AdvertisementsRequest{Parent: parent})
		return err == nil && len(l2.GetL2Advertisements()) == 1, fmt.Sprint(l2, err)
	})

	// An IPAddressPool whose pool ID is another tenant's IPAddressPool
	// (tenant "tN-shared"'s "pool" and this tenant's "shared-pool" are
	// both "tN-shared-pool") is refused, naming that tenant, and the other
	// pool is left as it is.
	other := e.tenant + "-shared"
	foreign := e.tenant + "-shared-pool"
	if _, err := ipam.Pools.CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: foreign, Pool: &ipamv1.Pool{
		Ranges: []string{e.v6(7)}, Tenants: []string{other},
		Labels: map[string]string{"beacon.io/tenant": other, "beacon.io/source": "metallb"},
	}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ipam.Pools.DeletePool(context.Background(), &ipamv1.DeletePoolRequest{Name: "pools/" + foreign, Force: true})
	})
	if _, err := cluster.Kubectl(ctx, strings.NewReplacer("NS", mns, "RANGE", e.v6(8)).Replace(`
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: shared-pool, namespace: NS}
spec:
  addresses: [RANGE]
`), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	waitRefused(t, pools, "shared-pool", "PoolIDTaken", fmt.Sprintf("tenant %q", other))
	got, err := ipam.Pools.GetPool(ctx, &ipamv1.GetPoolRequest{Name: "pools/" + foreign})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{e.v6(7)}, got.GetPool().GetRanges()); diff != "" {
		t.Errorf("the other tenant's pool's ranges (-want +got):\n%s", diff)
	}
}

// waitRefused waits until the IPAddressPool name's status says Synced
// False, with each of want in its conditions (a reason, words of the
// message).
func waitRefused(t *testing.T, pools dynamic.ResourceInterface, name string, want ...string) {
	t.Helper()
	waitFor(t, name+" to be refused in its status", func() (bool, string) {
		u, err := pools.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		c := fmt.Sprint(conds)
		ok := syncedIs(u, "False")
		for _, w := range want {
			ok = ok && strings.Contains(c, w)
		}
		return ok, c
	})
}

func syncedIs(u *unstructured.Unstructured, status string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Synced" {
			return m["status"] == status
		}
	}
	return false
}

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return dynamic.NewForConfigOrDie(rc)
}
