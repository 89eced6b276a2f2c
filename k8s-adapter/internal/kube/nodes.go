package kube

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// nodeSync keeps one IPAM Node (tenants/{tenant}/nodes/{node}) per
// Kubernetes Node of the cluster, carrying the Node's labels: the node
// selectors of L2 and BGP advertisements and BGP peers match them (merged
// over the labels each announcer registers with), and a Node labelled
// node.kubernetes.io/exclude-from-external-load-balancers announces
// nothing. Every change to a Node's labels, and a periodic pass, writes the
// differences; IPAM Nodes of the tenant that the cluster no longer has are
// deleted: the cluster owns its tenant's Node records.
type nodeSync struct {
	c       *Controller
	inf     cache.SharedIndexInformer
	trigger chan struct{}
	ledger  *ledger
}

func newNodeSync(c *Controller) (*nodeSync, error) {
	s := &nodeSync{
		c:       c,
		inf:     c.factory.Core().V1().Nodes().Informer(),
		trigger: make(chan struct{}, 1),
		ledger:  newLedger(c.logger, "node labels"),
	}
	if err := s.inf.SetTransform(nodeLabelsOnly); err != nil {
		return nil, err
	}
	if _, err := s.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.poke() },
		UpdateFunc: s.changed,
		DeleteFunc: func(any) { s.poke() },
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// nodeLabelsOnly keeps a cached Node's name and labels: the status (images,
// conditions, addresses) that makes Nodes big and changes every few seconds
// is never read.
func nodeLabelsOnly(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels,
	}}, nil
}

func (s *nodeSync) poke() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// changed pokes when a Node's labels changed.
func (s *nodeSync) changed(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.Node)
	n, ok2 := newObj.(*corev1.Node)
	if ok1 && ok2 && maps.Equal(o.Labels, n.Labels) {
		return
	}
	s.poke()
}

// run waits for the Node cache to fill (a partial cache would delete the
// records of the Nodes not in it yet), then syncs on every change and every
// NodeResync until ctx is done.
func (s *nodeSync) run(ctx context.Context) {
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	synced := cache.WaitForCacheSync(wait.Done(), s.inf.HasSynced)
	cancel()
	if !synced {
		if ctx.Err() != nil {
			return
		}
		s.c.logger.WarnContext(ctx, "Nodes not listed after 30 s (does the adapter's ClusterRole allow list and watch on nodes?); node labels are synced once they are")
		if !cache.WaitForCacheSync(ctx.Done(), s.inf.HasSynced) {
			return
		}
	}
	resyncLoop(ctx, s.c.logger, "node labels", s.c.cfg.NodeResync, 0, s.trigger, s.ledger.nextRetry, s.sync)
}

// sync makes the tenant's IPAM Nodes those of the cluster.
func (s *nodeSync) sync(ctx context.Context) error {
	var want []desired[*ipamv1.Node]
	for _, obj := range s.inf.GetStore().List() {
		if n, ok := obj.(*corev1.Node); ok {
			want = append(want, desired[*ipamv1.Node]{id: n.Name, msg: &ipamv1.Node{Labels: n.Labels}, out: &outcome{}})
		}
	}
	slices.SortFunc(want, func(a, b desired[*ipamv1.Node]) int { return strings.Compare(a.id, b.id) })
	del, err := apply(ctx, s.ledger, s.kind("tenants/"+s.c.cfg.Tenant), want)
	return errors.Join(err, del())
}

func (s *nodeSync) kind(parent string) kindOps[*ipamv1.Node] {
	an := s.c.ipam.Announcements
	labelsOnly := &fieldmaskpb.FieldMask{Paths: []string{"labels"}}
	return kindOps[*ipamv1.Node]{
		kind: "Node",
		list: func(ctx context.Context) (map[string]*ipamv1.Node, error) {
			all, err := listAll(ctx, func(ctx context.Context, token string) ([]*ipamv1.Node, string, error) {
				r, err := an.ListNodes(ctx, &ipamv1.ListNodesRequest{Parent: parent, PageSize: 1000, PageToken: token})
				return r.GetNodes(), r.GetNextPageToken(), err
			})
			out := make(map[string]*ipamv1.Node, len(all))
			for _, n := range all {
				out[lastPart(n.GetName())] = n
			}
			return out, err
		},
		equal: func(have, want *ipamv1.Node) bool { return maps.Equal(have.GetLabels(), want.GetLabels()) },
		create: func(ctx context.Context, id string, v *ipamv1.Node) error {
			_, err := an.CreateNode(ctx, &ipamv1.CreateNodeRequest{Parent: parent, NodeId: id, Node: v})
			return err
		},
		update: func(ctx context.Context, id string, v *ipamv1.Node) error {
			v = proto.CloneOf(v)
			v.Name = parent + "/nodes/" + id
			_, err := an.UpdateNode(ctx, &ipamv1.UpdateNodeRequest{Node: v, UpdateMask: labelsOnly})
			return err
		},
		delete: func(ctx context.Context, id string) error {
			_, err := an.DeleteNode(ctx, &ipamv1.DeleteNodeRequest{Name: parent + "/nodes/" + id})
			return ignoreNotFound(err)
		},
	}
}
