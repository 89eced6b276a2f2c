package kube_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
	"github.com/beaconlb/beacon/k8s-adapter/internal/reason"
	"github.com/beaconlb/beacon/k8s-adapter/internal/request"
	"github.com/beaconlb/beacon/k8s-adapter/internal/testenv"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// TestDeployManifests applies deploy/k8s/adapter and runs the adapter with
// its ServiceAccount's token: the RBAC rules are enough for Services, their
// status, Events, the Lease, Nodes' labels and MetalLB's resources (with a
// password Secret), and the Deployment passes the API server's validation.
func TestDeployManifests(t *testing.T) {
	installCRDs(t)
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "deploy", "k8s", "adapter")
	if _, err := cluster.Kubectl(ctx, "", "create", "namespace", "metallb-system"); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
		t.Fatal(err)
	}
	for _, f := range []string{"namespace.yaml", "rbac.yaml", "lease.yaml"} {
		if _, err := cluster.Kubectl(ctx, "", "apply", "-f", filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cluster.Kubectl(ctx, "", "apply", "--dry-run=server", "-f", filepath.Join(dir, "deployment.yaml")); err != nil {
		t.Fatal(err)
	}
	if out, err := cluster.Kubectl(ctx, "", "kustomize", dir); err != nil || !strings.Contains(out, "kind: Deployment") || !strings.Contains(out, "kind: ValidatingAdmissionPolicy") {
		t.Fatalf("kustomize: %v\n%s", err, out)
	}
	// The webhook overlay: the adapter, its webhook Service and
	// configuration, passing the API server's validation.
	whDir := filepath.Join(root, "deploy", "k8s", "adapter-webhook")
	out, err := cluster.Kubectl(ctx, "", "kustomize", whDir)
	if err != nil || !strings.Contains(out, "--webhook-listen=:9443") || !strings.Contains(out, "kind: ValidatingWebhookConfiguration") {
		t.Fatalf("kustomize %s: %v\n%s", whDir, err, out)
	}
	if _, err := cluster.Kubectl(ctx, out, "apply", "--dry-run=server", "-f", "-"); err != nil {
		t.Fatal(err)
	}

	tok, err := k8s.CoreV1().ServiceAccounts("beacon-system").CreateToken(ctx, "beacon-k8s-adapter", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cluster.WriteKubeconfig(kubeconfig, tok.Status.Token); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t, nil)
	if _, err := cluster.Kubectl(ctx, fmt.Sprintf(`
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: rbac-pool, namespace: metallb-system}
spec:
  addresses: [%s]
---
apiVersion: v1
kind: Secret
metadata: {name: peer-password, namespace: metallb-system}
type: kubernetes.io/basic-auth
stringData: {password: pw}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: rbac-peer, namespace: metallb-system}
spec:
  myASN: 64500
  peerASN: 64501
  peerAddress: 203.0.113.209
  passwordSecret: {name: peer-password}
`, e.v4(0)), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ipam.Pools.DeletePool(context.Background(), &ipamv1.DeletePoolRequest{Name: "pools/" + e.tenant + "-rbac-pool", Force: true})
	})

	kc, err := kube.Connect(kube.ConnectOptions{Kubeconfig: kubeconfig, QPS: 50, Burst: 100})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.New(kc, ipam, testLogger(t), kube.Config{
		Tenant: e.tenant, Filter: request.Filter{Class: e.class}, MetalLBNamespace: "metallb-system", MetalLBResync: time.Second, SyncNodes: true,
		LeaderElection: kube.LeaderElection{Enabled: true, Namespace: "beacon-system", Name: "beacon-k8s-adapter", Identity: "rbac-test",
			LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("adapter: %v", err)
		}
	}()

	node := fmt.Sprintf("n%d-rbac", e.n)
	if _, err := k8s.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"zone": "a"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) }()
	e.create(e.svc("rbac", func(s *corev1.Service) {
		s.Annotations = map[string]string{"metallb.io/address-pool": "rbac-pool"}
	}))
	e.waitIPs("rbac", 1)
	e.waitEvent("rbac", reason.IPAllocated)
	waitFor(t, "the finalizer", func() (bool, string) {
		s, err := e.get("rbac")
		return err == nil && len(s.Finalizers) == 1, fmt.Sprint(s.GetFinalizers(), err)
	})
	waitFor(t, "the peer with its password", func() (bool, string) {
		p, err := ipam.Announcements.GetBGPPeer(ctx, &ipamv1.GetBGPPeerRequest{Name: "tenants/" + e.tenant + "/bgpPeers/mlb-rbac-peer"})
		return err == nil && p.GetBgpPeer().GetHasPassword(), fmt.Sprint(p, err)
	})
	waitFor(t, "the Node's labels", func() (bool, string) {
		n, err := ipam.Announcements.GetNode(ctx, &ipamv1.GetNodeRequest{Name: "tenants/" + e.tenant + "/nodes/" + node})
		return err == nil && n.GetNode().GetLabels()["zone"] == "a", fmt.Sprint(n, err)
	})
	waitFor(t, "rbac-pool's status", func() (bool, string) {
		out, err := cluster.Kubectl(ctx, "", "-n", "metallb-system", "get", "ipaddresspool", "rbac-pool", "-o", "jsonpath={.status.assignedIPv4}")
		return err == nil && out == "1", out
	})
	lease, err := k8s.CoordinationV1().Leases("beacon-system").Get(ctx, "beacon-k8s-adapter", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "rbac-test" {
		t.Errorf("lease: %v %v", lease.Spec, err)
	}
}

// TestBeaconManifests checks deploy/k8s/beacon (the IPAM, the gateway, the
// announcers and the adapter) against the API server's validation, as
// kustomize renders it; internal/manifests checks the overlays.
func TestBeaconManifests(t *testing.T) {
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "deploy", "k8s", "beacon")
	if _, err := cluster.Kubectl(ctx, "", "apply", "-f", filepath.Join(root, "deploy", "k8s", "adapter", "namespace.yaml")); err != nil {
		t.Fatal(err)
	}
	// The base includes the adapter, whose Role for BGP password Secrets
	// lives in MetalLB's namespace.
	if _, err := cluster.Kubectl(ctx, "", "create", "namespace", "metallb-system"); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
		t.Fatal(err)
	}
	out, err := cluster.Kubectl(ctx, "", "apply", "--dry-run=server", "-k", dir)
	if err != nil {
		t.Fatalf("server-side dry run: %v\n%s", err, out)
	}
	for _, want := range []string{"deployment.apps/beacon-ipamd", "service/beacon-ipamd", "poddisruptionbudget.policy/beacon-ipamd",
		"deployment.apps/beacon-gateway", "service/beacon-gateway", "daemonset.apps/beacon-announcer"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run did not accept %s:\n%s", want, out)
		}
	}
}
