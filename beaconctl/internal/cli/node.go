package cli

import (
	"context"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func nodeKind() *configKind[*ipamv1.Node] {
	return &configKind[*ipamv1.Node]{
		use:        "node",
		aliases:    []string{"nodes"},
		noun:       "node",
		plural:     "nodes",
		collection: "nodes",
		sampleID:   "worker-1",
		short:      "Manage the labels the cluster gives its nodes, for node selectors",
		long: `Manage a tenant's nodes as its cluster sees them: their labels, which the
node selectors of L2 and BGP advertisements and BGP peers match. They are
merged over the labels each announcer registers with (--labels); on a key
both set, the node's value wins. A node labelled
node.kubernetes.io/exclude-from-external-load-balancers announces nothing.

In a Kubernetes cluster the k8s adapter keeps one node per Kubernetes Node
(--sync-nodes) and removes the ones the cluster does not have: edit the
Node objects there instead. A node is named "tenants/TENANT/nodes/NODE";
commands take NODE (the host name: lower-case letters, digits, '-' and
'.') with --tenant, or the full name.`,
		example: `  beaconctl node create worker-1 --tenant acme --label zone=a --label rack=r1
  beaconctl node list --tenant acme
  beaconctl node update worker-1 --tenant acme --label node.kubernetes.io/exclude-from-external-load-balancers=
  beaconctl node delete worker-1 --tenant acme`,
		createLong: `Record the labels of the node NODE in --tenant, each given as
--label KEY=VALUE.`,
		createExample: `  beaconctl node create worker-1 --tenant acme --label zone=a`,
		updateLong: `Change a node's labels: --label KEY=VALUE adds a label or changes its
value, --label KEY- removes it. The node is read first, and the change is
sent with the etag read, so that it fails with Aborted instead of
overwriting a change made meanwhile; run it again in that case.`,
		updateExample: `  beaconctl node update worker-1 --tenant acme --label zone=b --label rack-`,
		newMsg:        func() *ipamv1.Node { return &ipamv1.Node{} },
		fields:        nodeFields,
		table:         output.NodeTable,
		create: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, parent, id string, m *ipamv1.Node, requestID string, validateOnly bool) (*ipamv1.Node, error) {
			resp, err := c.CreateNode(ctx, &ipamv1.CreateNodeRequest{
				Parent: parent, NodeId: id, Node: m, RequestId: requestID, ValidateOnly: validateOnly,
			})
			return resp.GetNode(), err
		},
		get: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, name string) (*ipamv1.Node, error) {
			resp, err := c.GetNode(ctx, &ipamv1.GetNodeRequest{Name: name})
			return resp.GetNode(), err
		},
		list: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, parent string, size int32, token string) ([]*ipamv1.Node, string, error) {
			resp, err := c.ListNodes(ctx, &ipamv1.ListNodesRequest{Parent: parent, PageSize: size, PageToken: token})
			return resp.GetNodes(), resp.GetNextPageToken(), err
		},
		update: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, m *ipamv1.Node, mask *fieldmaskpb.FieldMask, requestID string, validateOnly bool) (*ipamv1.Node, error) {
			resp, err := c.UpdateNode(ctx, &ipamv1.UpdateNodeRequest{
				Node: m, UpdateMask: mask, RequestId: requestID, ValidateOnly: validateOnly,
			})
			return resp.GetNode(), err
		},
		delete: func(ctx context.Context, c ipamv1.AnnouncementServiceClient, name, etag, requestID string) (proto.Message, error) {
			return c.DeleteNode(ctx, &ipamv1.DeleteNodeRequest{Name: name, Etag: etag, RequestId: requestID})
		},
	}
}

func nodeFields(_ *globals, fs *pflag.FlagSet, update bool) []field[*ipamv1.Node] {
	var labels []string
	fs.StringArrayVar(&labels, "label", nil, usage(update,
		"label `KEY=VALUE` of the node (repeatable)",
		"`KEY=VALUE` to add or change a label, KEY- to remove one (repeatable)"))
	type m = *ipamv1.Node
	return []field[m]{
		{flags: []string{"label"}, path: "labels", needsCurrent: update, set: func(n m, x fieldInput[m]) (err error) {
			if !update {
				n.Labels, err = parseLabels("label", labels)
				return err
			}
			n.Labels, err = applyLabelEdits("label", x.current.GetLabels(), labels)
			return err
		}},
	}
}
