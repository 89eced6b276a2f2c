package kube_test

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
	"github.com/beaconlb/beacon/k8s-adapter/internal/request"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

const excludeLabel = "node.kubernetes.io/exclude-from-external-load-balancers"

// TestNodeLabelsSync: the adapter keeps the tenant's IPAM Nodes equal to
// the cluster's Nodes (their labels, the exclusion label among them),
// through creation, label changes, deletion, changes made to the IPAM
// records by someone else, and records of Nodes the cluster never had.
func TestNodeLabelsSync(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	parent := "tenants/" + e.tenant
	nodeA, nodeB := fmt.Sprintf("n%d-a.example.test", e.n), fmt.Sprintf("n%d-b.example.test", e.n)
	mkNode := func(name string, labels map[string]string) {
		t.Helper()
		if _, err := k8s.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	// ipamLabels returns the IPAM Node's labels, or nil when it has none.
	ipamLabels := func(name string) (map[string]string, bool) {
		r, err := ipam.Announcements.GetNode(ctx, &ipamv1.GetNodeRequest{Name: parent + "/nodes/" + name})
		if status.Code(err) == codes.NotFound {
			return nil, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return r.GetNode().GetLabels(), true
	}
	waitLabels := func(name string, want map[string]string) {
		t.Helper()
		waitFor(t, "IPAM node "+name+" to carry the Node's labels", func() (bool, string) {
			got, ok := ipamLabels(name)
			return ok && maps.Equal(got, want), fmt.Sprintf("%v (exists %v)", got, ok)
		})
	}
	waitGone := func(name string) {
		t.Helper()
		waitFor(t, "IPAM node "+name+" to go", func() (bool, string) {
			got, ok := ipamLabels(name)
			return !ok, fmt.Sprint(got)
		})
	}

	// A record the cluster has no Node for, left from before.
	ghost := fmt.Sprintf("n%d-ghost", e.n)
	if _, err := ipam.Announcements.CreateNode(ctx, &ipamv1.CreateNodeRequest{Parent: parent, NodeId: ghost, Node: &ipamv1.Node{}}); err != nil {
		t.Fatal(err)
	}
	labelsA := map[string]string{"zone": "a", "kubernetes.io/hostname": nodeA}
	mkNode(nodeA, labelsA)
	e.start(func(c *kube.Config) { c.SyncNodes, c.NodeResync = true, 300*time.Millisecond })
	waitLabels(nodeA, labelsA)
	waitGone(ghost)

	// A Node added later, excluded from load balancers.
	labelsB := map[string]string{"zone": "b", excludeLabel: ""}
	mkNode(nodeB, labelsB)
	waitLabels(nodeB, labelsB)

	// A label change.
	n, err := k8s.CoreV1().Nodes().Get(ctx, nodeA, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels["zone"] = "c"
	if _, err := k8s.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	labelsA["zone"] = "c"
	waitLabels(nodeA, labelsA)

	// Someone else changes the IPAM record: the next pass restores it.
	if _, err := ipam.Announcements.UpdateNode(ctx, &ipamv1.UpdateNodeRequest{
		Node:       &ipamv1.Node{Name: parent + "/nodes/" + nodeA, Labels: map[string]string{"zone": "x"}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"labels"}},
	}); err != nil {
		t.Fatal(err)
	}
	waitLabels(nodeA, labelsA)

	// The Node goes: so does its record.
	if err := k8s.CoreV1().Nodes().Delete(ctx, nodeA, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(nodeA)
	if _, ok := ipamLabels(nodeB); !ok {
		t.Fatalf("node %s's record went with %s", nodeB, nodeA)
	}
}

// TestServicesServedWithoutNodeRBAC: an adapter whose ClusterRole predates
// node sync (no access to Nodes) still gives Services their addresses; only
// node labels wait.
func TestServicesServedWithoutNodeRBAC(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	sa := fmt.Sprintf("adapter-no-nodes-%d", e.n)
	if _, err := cluster.Kubectl(ctx, "", "create", "namespace", "beacon-system"); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
		t.Fatal(err)
	}
	if _, err := cluster.Kubectl(ctx, fmt.Sprintf(`
apiVersion: v1
kind: ServiceAccount
metadata: {name: %[1]s, namespace: beacon-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %[1]s}
rules:
- {apiGroups: [""], resources: [services], verbs: [get, list, watch, patch, update]}
- {apiGroups: [""], resources: [services/status], verbs: [patch, update]}
- {apiGroups: [""], resources: [namespaces], verbs: [get, list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [get, list, watch]}
- {apiGroups: ["", events.k8s.io], resources: [events], verbs: [create, patch, update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[1]s}
subjects: [{kind: ServiceAccount, name: %[1]s, namespace: beacon-system}]
`, sa), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	tok, err := k8s.CoreV1().ServiceAccounts("beacon-system").CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := cluster.WriteKubeconfig(kubeconfig, tok.Status.Token); err != nil {
		t.Fatal(err)
	}
	e.pool("main", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	kc, err := kube.Connect(kube.ConnectOptions{Kubeconfig: kubeconfig, QPS: 50, Burst: 100})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.New(kc, ipam, testLogger(t), kube.Config{Tenant: e.tenant, Filter: request.Filter{Class: e.class}, SyncNodes: true})
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
	e.create(e.svc("web"))
	e.waitIPs("web", 1)
}
