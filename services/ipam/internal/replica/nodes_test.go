package replica_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

const excludeLabel = "node.kubernetes.io/exclude-from-external-load-balancers"

// dialReplica returns a client connection to the replica at addr, closed
// when the test ends.
func dialReplica(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestNodeValidation: every bad field of the Node resource is named.
func TestNodeValidation(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	ann := ipamv1.NewAnnouncementServiceClient(dialReplica(t, n.addr))
	ctx := ctxT(t)
	long := make([]byte, 254)
	for i := range long {
		long[i] = 'a'
	}
	for _, tc := range []struct {
		name string
		call func() error
		want []string
	}{
		{"upper-case node name", func() error {
			_, err := ann.CreateNode(ctx, &ipamv1.CreateNodeRequest{Parent: "tenants/c1", NodeId: "Node-A", Node: &ipamv1.Node{}})
			return err
		}, []string{"node_id"}},
		{"node name too long", func() error {
			_, err := ann.CreateNode(ctx, &ipamv1.CreateNodeRequest{Parent: "tenants/c1", NodeId: string(long), Node: &ipamv1.Node{}})
			return err
		}, []string{"node_id"}},
		{"empty part in the node name", func() error {
			_, err := ann.CreateNode(ctx, &ipamv1.CreateNodeRequest{Parent: "tenants/c1", NodeId: "a..b", Node: &ipamv1.Node{}})
			return err
		}, []string{"node_id"}},
		{"node name part starting with '-'", func() error {
			_, err := ann.CreateNode(ctx, &ipamv1.CreateNodeRequest{Parent: "tenants/c1", NodeId: "worker.-a", Node: &ipamv1.Node{}})
			return err
		}, []string{"node_id"}},
		{"too many labels", func() error {
			labels := map[string]string{}
			for i := range 513 {
				labels[fmt.Sprintf("l%d", i)] = "x"
			}
			_, err := ann.CreateNode(ctx, &ipamv1.CreateNodeRequest{Parent: "tenants/c1", NodeId: "n1", Node: &ipamv1.Node{Labels: labels}})
			return err
		}, []string{"node.labels"}},
		{"bad label key", func() error {
			_, err := ann.CreateNode(ctx, &ipamv1.CreateNodeRequest{Parent: "tenants/c1", NodeId: "n1", Node: &ipamv1.Node{Labels: map[string]string{"-bad": "x"}}})
			return err
		}, []string{"node.labels[-bad]"}},
		{"bad parent", func() error {
			_, err := ann.CreateNode(ctx, &ipamv1.CreateNodeRequest{Parent: "c1", NodeId: "n1", Node: &ipamv1.Node{}})
			return err
		}, []string{"parent"}},
		{"bad name on get", func() error {
			_, err := ann.GetNode(ctx, &ipamv1.GetNodeRequest{Name: "tenants/c1/nodes/a b"})
			return err
		}, []string{"name"}},
		{"update without mask", func() error {
			_, err := ann.UpdateNode(ctx, &ipamv1.UpdateNodeRequest{Node: &ipamv1.Node{Name: "tenants/c1/nodes/n1"}})
			return err
		}, []string{"update_mask"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			wantCode(t, err, codes.InvalidArgument)
			if diff := cmp.Diff(tc.want, violations(err)); diff != "" {
				t.Fatalf("violations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNodeLabels: the cluster's view of a node (the Node resource, which
// the k8s adapter keeps from the Kubernetes Node) is merged over the labels
// the announcer registered with, decides node selectors, and the exclusion
// label keeps a node from announcing.
func TestNodeLabels(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	n2 := startNode(t, env.dial(t), replica.Options{}) // serves node-a
	mustPool(t, n, "lan", &ipamv1.Pool{Ranges: []string{"192.0.2.100-192.0.2.110"}})
	ann := ipamv1.NewAnnouncementServiceClient(dialReplica(t, n.addr))
	ctx := ctxT(t)
	if _, err := ann.CreateL2Advertisement(ctx, &ipamv1.CreateL2AdvertisementRequest{Parent: "tenants/c1", L2AdvertisementId: "zone-a", L2Advertisement: &ipamv1.L2Advertisement{
		Pools:         []string{"pools/lan"},
		NodeSelectors: []*ipamv1.LabelSelector{{MatchLabels: map[string]string{"zone": "a"}}},
	}}); err != nil {
		t.Fatal(err)
	}
	a := subscribe(t, n2.addr, "c1", "node-a", map[string]string{"zone": "b", "rack": "r1"})
	b := subscribe(t, n.addr, "c1", "node-b", nil)
	vip := mustAllocate(t, n, "c1", &ipamv1.Allocation{Owner: "ns/web"}).GetAddresses()[0]
	waitFor(t, "both nodes' first plans", func() bool { return a.planned() && b.planned() })
	never(t, time.Second, "a node answers before any is in zone a", func() bool {
		return a.everAnswered(vip) || b.everAnswered(vip)
	})

	// The cluster puts node-b in zone a: it answers.
	nb, err := ann.CreateNode(ctx, &ipamv1.CreateNodeRequest{Parent: "tenants/c1", NodeId: "node-b", Node: &ipamv1.Node{Labels: map[string]string{"zone": "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := nb.GetNode(); got.GetName() != "tenants/c1/nodes/node-b" || got.GetUid() == "" || got.GetEtag() == "" || got.GetCreateTime() == nil {
		t.Fatalf("created node = %v", got)
	}
	waitFor(t, "node-b to answer", func() bool { return cmp.Equal([]string{vip}, b.l2Addrs()) })

	// node-a's cluster labels win over the zone it registered with (and
	// keep its other labels): it becomes a candidate, the address stays.
	if _, err := ann.CreateNode(ctx, &ipamv1.CreateNodeRequest{Parent: "tenants/c1", NodeId: "node-a", Node: &ipamv1.Node{Labels: map[string]string{"zone": "a"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ann.CreateL2Advertisement(ctx, &ipamv1.CreateL2AdvertisementRequest{Parent: "tenants/c1", L2AdvertisementId: "rack", L2Advertisement: &ipamv1.L2Advertisement{
		Pools:         []string{"pools/lan"},
		NodeSelectors: []*ipamv1.LabelSelector{{MatchLabels: map[string]string{"rack": "r1", "zone": "a"}}},
	}}); err != nil {
		t.Fatal(err)
	}
	never(t, time.Second, "the address moved when node-a became a candidate", func() bool {
		return a.everAnswered(vip) || !cmp.Equal([]string{vip}, b.l2Addrs())
	})

	// Excluding node-b moves the address to node-a.
	up, err := ann.UpdateNode(ctx, &ipamv1.UpdateNodeRequest{
		Node:       &ipamv1.Node{Name: "tenants/c1/nodes/node-b", Labels: map[string]string{"zone": "a", excludeLabel: ""}, Etag: nb.GetNode().GetEtag()},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"labels"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if up.GetNode().GetUid() != nb.GetNode().GetUid() || up.GetNode().GetEtag() == nb.GetNode().GetEtag() {
		t.Fatalf("update = %v", up.GetNode())
	}
	waitFor(t, "the address to leave the excluded node", func() bool {
		return cmp.Equal([]string{vip}, a.l2Addrs()) && len(b.l2Addrs()) == 0
	})
	// The announcer resource shows the labels the selectors match, and the
	// exclusion.
	anc := ipamv1.NewAnnouncerServiceClient(dialReplica(t, n.addr))
	got, err := anc.GetAnnouncer(ctx, &ipamv1.GetAnnouncerRequest{Name: "tenants/c1/announcers/node-a"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"zone": "a", "rack": "r1"}, got.GetAnnouncer().GetLabels()); diff != "" || got.GetAnnouncer().GetExcluded() {
		t.Fatalf("node-a's announcer: labels (-want +got):\n%s\nexcluded %v", diff, got.GetAnnouncer().GetExcluded())
	}
	all, err := anc.ListAnnouncers(ctx, &ipamv1.ListAnnouncersRequest{Parent: "tenants/c1"})
	if err != nil {
		t.Fatal(err)
	}
	excluded := map[string]bool{}
	for _, x := range all.GetAnnouncers() {
		excluded[x.GetName()] = x.GetExcluded()
	}
	if diff := cmp.Diff(map[string]bool{"tenants/c1/announcers/node-a": false, "tenants/c1/announcers/node-b": true}, excluded); diff != "" {
		t.Fatalf("ListAnnouncers excluded (-want +got):\n%s", diff)
	}
	// Page by page, each announcer still carries its node's labels.
	paged := map[string]bool{}
	token := ""
	for range 4 {
		resp, err := anc.ListAnnouncers(ctx, &ipamv1.ListAnnouncersRequest{Parent: "tenants/c1", PageSize: 1, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range resp.GetAnnouncers() {
			paged[x.GetName()] = x.GetExcluded()
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if diff := cmp.Diff(excluded, paged); diff != "" {
		t.Fatalf("ListAnnouncers in pages of 1, excluded (-want +got):\n%s", diff)
	}

	// A stale etag is refused.
	_, err = ann.UpdateNode(ctx, &ipamv1.UpdateNodeRequest{
		Node:       &ipamv1.Node{Name: "tenants/c1/nodes/node-b", Etag: nb.GetNode().GetEtag()},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"labels"}},
	})
	wantCode(t, err, codes.Aborted)

	list, err := ann.ListNodes(ctx, &ipamv1.ListNodesRequest{Parent: "tenants/c1"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, nd := range list.GetNodes() {
		names = append(names, nd.GetName())
	}
	if diff := cmp.Diff([]string{"tenants/c1/nodes/node-a", "tenants/c1/nodes/node-b"}, names); diff != "" {
		t.Fatalf("ListNodes (-want +got):\n%s", diff)
	}
	gotNode, err := ann.GetNode(ctx, &ipamv1.GetNodeRequest{Name: "tenants/c1/nodes/node-b"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"zone": "a", excludeLabel: ""}, gotNode.GetNode().GetLabels()); diff != "" {
		t.Fatalf("GetNode labels (-want +got):\n%s", diff)
	}

	// Emptying node-a's record's labels leaves its registered ones.
	if _, err := ann.UpdateNode(ctx, &ipamv1.UpdateNodeRequest{
		Node:       &ipamv1.Node{Name: "tenants/c1/nodes/node-a"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"labels"}},
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "node-a's announcer to show its registered labels", func() bool {
		got, err := anc.GetAnnouncer(ctx, &ipamv1.GetAnnouncerRequest{Name: "tenants/c1/announcers/node-a"})
		return err == nil && cmp.Equal(map[string]string{"zone": "b", "rack": "r1"}, got.GetAnnouncer().GetLabels())
	})
	waitFor(t, "node-a to stop answering", func() bool { return len(a.l2Addrs()) == 0 && len(b.l2Addrs()) == 0 })

	// Forgetting node-a's record changes nothing more: nobody answers.
	if _, err := ann.DeleteNode(ctx, &ipamv1.DeleteNodeRequest{Name: "tenants/c1/nodes/node-a"}); err != nil {
		t.Fatal(err)
	}
	never(t, time.Second, "a node answers after node-a's record went", func() bool {
		return len(a.l2Addrs())+len(b.l2Addrs()) != 0
	})
	_, err = ann.GetNode(ctx, &ipamv1.GetNodeRequest{Name: "tenants/c1/nodes/node-a"})
	wantCode(t, err, codes.NotFound)
}
