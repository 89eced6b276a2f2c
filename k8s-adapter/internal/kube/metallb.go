package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/beaconlb/beacon/k8s-adapter/internal/lb"
	"github.com/beaconlb/beacon/k8s-adapter/internal/metallb"
	"github.com/beaconlb/beacon/k8s-adapter/internal/reason"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// MetalLB resource kinds the adapter imports.
const (
	KindIPAddressPool    = "IPAddressPool"
	KindL2Advertisement  = "L2Advertisement"
	KindBGPAdvertisement = "BGPAdvertisement"
	KindBGPPeer          = "BGPPeer"
	KindBFDProfile       = "BFDProfile"
	KindCommunity        = "Community"
)

// metallbResources are the resources read, by kind; for BGPPeer the first
// version served wins.
var metallbResources = []struct {
	kind     string
	resource string
	versions []string
}{
	{KindIPAddressPool, "ipaddresspools", []string{"v1beta1"}},
	{KindL2Advertisement, "l2advertisements", []string{"v1beta1"}},
	{KindBGPAdvertisement, "bgpadvertisements", []string{"v1beta1"}},
	{KindBGPPeer, "bgppeers", []string{"v1beta2", "v1beta1"}},
	{KindBFDProfile, "bfdprofiles", []string{"v1beta1"}},
	{KindCommunity, "communities", []string{"v1beta1"}},
}

// metallbSync applies the MetalLB resources of one namespace to the IPAM as
// a whole: every change (and a periodic tick) recomputes the IPAM pools and
// announcement resources they stand for, creates, updates and deletes the
// adapter's own ones (pools labelled beacon.io/source=metallb and
// beacon.io/tenant=TENANT, announcement resources whose ID starts with
// "mlb-"), and writes each resource's status.
type metallbSync struct {
	c         *Controller
	ns        string
	factory   dynamicinformer.DynamicSharedInformerFactory
	informers map[string]cache.SharedIndexInformer
	gvrs      map[string]schema.GroupVersionResource
	trigger   chan struct{}

	ledger *ledger
	// Touched by the sync loop only: whether the import at hand created or
	// changed a pool, and whether one import was done.
	poolsChanged, imported bool
}

func newMetalLBSync(c *Controller) (*metallbSync, error) {
	m := &metallbSync{
		c:         c,
		ns:        c.cfg.MetalLBNamespace,
		factory:   dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.kube.dynamic, 0, c.cfg.MetalLBNamespace, nil),
		informers: map[string]cache.SharedIndexInformer{},
		gvrs:      map[string]schema.GroupVersionResource{},
		trigger:   make(chan struct{}, 1),
		ledger:    newLedger(c.logger, "MetalLB resource"),
	}
	if c.cfg.MetalLBBackoff > 0 {
		m.ledger.minBackoff, m.ledger.maxBackoff = c.cfg.MetalLBBackoff, max(c.cfg.MetalLBBackoff, m.ledger.maxBackoff)
	}
	return m, nil
}

// start finds which MetalLB resources the API server serves and starts
// informers for them. Resources whose CRDs are installed later are picked up
// at the adapter's next start.
func (m *metallbSync) start(ctx context.Context) {
	served := map[string]map[string]bool{}
	for _, v := range []string{"v1beta1", "v1beta2"} {
		list, err := m.c.kube.client.Discovery().ServerResourcesForGroupVersion("metallb.io/" + v)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if served[r.Name] == nil {
				served[r.Name] = map[string]bool{}
			}
			served[r.Name][v] = true
		}
	}
	for _, r := range metallbResources {
		for _, v := range r.versions {
			if !served[r.resource][v] {
				continue
			}
			gvr := schema.GroupVersionResource{Group: "metallb.io", Version: v, Resource: r.resource}
			inf := m.factory.ForResource(gvr).Informer()
			_ = inf.SetTransform(stripManagedFields)
			_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(any) { m.poke() },
				UpdateFunc: func(o, n any) { m.changed(o, n) },
				DeleteFunc: func(any) { m.poke() },
			})
			m.informers[r.kind], m.gvrs[r.kind] = inf, gvr
			break
		}
	}
	if len(m.informers) == 0 {
		m.c.logger.InfoContext(ctx, "MetalLB resources not served (CRDs not installed); not importing them", "namespace", m.ns)
	} else {
		m.c.logger.InfoContext(ctx, "importing MetalLB resources", "namespace", m.ns, "kinds", slices.Sorted(maps.Keys(m.informers)))
	}
	m.factory.Start(ctx.Done())
}

func (m *metallbSync) hasSynced() bool {
	for _, inf := range m.informers {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// poke records a change of the configuration (closing the gate until it
// is imported) and wakes the import.
func (m *metallbSync) poke() {
	m.c.gate.changed()
	select {
	case m.trigger <- struct{}{}:
	default:
	}
}

// changed pokes unless only the status changed (the adapter's own write).
func (m *metallbSync) changed(oldObj, newObj any) {
	o, ok1 := oldObj.(*unstructured.Unstructured)
	n, ok2 := newObj.(*unstructured.Unstructured)
	if ok1 && ok2 && o.GetGeneration() == n.GetGeneration() && maps.Equal(o.GetLabels(), n.GetLabels()) && o.GetGeneration() != 0 {
		return
	}
	m.poke()
}

// run syncs on every change and every MetalLBResync until ctx is done.
func (m *metallbSync) run(ctx context.Context) {
	defer m.factory.Shutdown()
	if len(m.informers) == 0 {
		<-ctx.Done()
		return
	}
	resyncLoop(ctx, m.c.logger, "MetalLB resources", m.c.cfg.MetalLBResync, m.c.cfg.MetalLBSettle, m.trigger, m.ledger.nextRetry, m.sync)
}

// objects returns the cached objects of a kind, by name.
func (m *metallbSync) objects(kind string) []*unstructured.Unstructured {
	inf, ok := m.informers[kind]
	if !ok {
		return nil
	}
	var out []*unstructured.Unstructured
	for _, obj := range inf.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok && u.GetDeletionTimestamp() == nil {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

func asObject(u *unstructured.Unstructured) metallb.Object {
	spec, _ := u.Object["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
	}
	return metallb.Object{Namespace: u.GetNamespace(), Name: u.GetName(), Labels: u.GetLabels(), Spec: spec}
}

// outcome is what the sync learnt about one MetalLB object.
type outcome struct {
	obj        *unstructured.Unstructured
	kind       string
	err        error // nil: in the IPAM as asked
	warning    string
	conditions []*ipamv1.Condition // the IPAM resource's own flags
	usage      map[string]any      // IPAddressPool only
}

// sync imports a snapshot of the MetalLB objects (see importAll), then
// gives the Services that hold no allocation their turns, oldest first:
// every such Service after the first import and after any that changed a
// pool (a Service that waited for a pool gets it now), else the Services
// parked meanwhile.
func (m *metallbSync) sync(ctx context.Context) error {
	gen := m.c.gate.generation()
	m.poolsChanged = false
	err := m.importAll(ctx)
	if ctx.Err() != nil {
		return err
	}
	m.c.runBatch(ctx, gen, m.poolsChanged || !m.imported)
	m.imported = true
	return err
}

// importAll applies every MetalLB object in the cache to the IPAM, as one
// snapshot, and writes their status.
func (m *metallbSync) importAll(ctx context.Context) error {
	tenant := m.c.cfg.Tenant
	parent := "tenants/" + tenant
	var outcomes []*outcome
	track := func(kind string, u *unstructured.Unstructured, err error) *outcome {
		o := &outcome{obj: u, kind: kind, err: err}
		outcomes = append(outcomes, o)
		return o
	}
	var bfds []desired[*ipamv1.BFDProfile]
	for _, u := range m.objects(KindBFDProfile) {
		b, err := metallb.BFDProfile(asObject(u))
		o := track(KindBFDProfile, u, err)
		if err == nil {
			bfds = append(bfds, desired[*ipamv1.BFDProfile]{metallb.ResourceID(u.GetNamespace(), u.GetName()), b, o})
		}
	}
	var comms []desired[*ipamv1.Community]
	for _, u := range m.objects(KindCommunity) {
		c, err := metallb.Community(asObject(u))
		o := track(KindCommunity, u, err)
		if err == nil {
			comms = append(comms, desired[*ipamv1.Community]{metallb.ResourceID(u.GetNamespace(), u.GetName()), c, o})
		}
	}
	var pools []desired[*ipamv1.Pool]
	for _, u := range m.objects(KindIPAddressPool) {
		p, err := metallb.Pool(tenant, asObject(u))
		o := track(KindIPAddressPool, u, err)
		if err == nil {
			pools = append(pools, desired[*ipamv1.Pool]{metallb.PoolID(tenant, u.GetNamespace(), u.GetName()), p, o})
		}
	}
	var peers []desired[*ipamv1.BGPPeer]
	for _, u := range m.objects(KindBGPPeer) {
		p, unsupported, err := metallb.BGPPeer(asObject(u), m.password(ctx))
		o := track(KindBGPPeer, u, err)
		if len(unsupported) > 0 {
			o.warning = "not supported by Beacon, ignored: " + strings.Join(unsupported, ", ")
		}
		if err == nil {
			peers = append(peers, desired[*ipamv1.BGPPeer]{metallb.ResourceID(u.GetNamespace(), u.GetName()), p, o})
		}
	}
	var l2s []desired[*ipamv1.L2Advertisement]
	for _, u := range m.objects(KindL2Advertisement) {
		a, err := metallb.L2Advertisement(tenant, asObject(u))
		o := track(KindL2Advertisement, u, err)
		if err == nil {
			l2s = append(l2s, desired[*ipamv1.L2Advertisement]{metallb.ResourceID(u.GetNamespace(), u.GetName()), a, o})
		}
	}
	var bgps []desired[*ipamv1.BGPAdvertisement]
	for _, u := range m.objects(KindBGPAdvertisement) {
		a, err := metallb.BGPAdvertisement(tenant, asObject(u))
		o := track(KindBGPAdvertisement, u, err)
		if err == nil {
			bgps = append(bgps, desired[*ipamv1.BGPAdvertisement]{metallb.ResourceID(u.GetNamespace(), u.GetName()), a, o})
		}
	}

	an := m.c.ipam.Announcements
	var errs []error
	// Referenced things first: BFD profiles and communities, pools, peers,
	// then the advertisements; deletions in the opposite order.
	bfdK := m.bfdKind(an, parent)
	comK := m.communityKind(an, parent)
	poolK := m.poolKind(tenant)
	peerK := m.peerKind(an, parent)
	l2K := m.l2Kind(an, parent)
	bgpK := m.bgpKind(an, parent)
	var del []func() error
	d, err := apply(ctx, m.ledger, bfdK, bfds)
	errs, del = append(errs, err), append(del, d)
	d, err = apply(ctx, m.ledger, comK, comms)
	errs, del = append(errs, err), append(del, d)
	d, err = apply(ctx, m.ledger, poolK, pools)
	errs, del = append(errs, err), append(del, d)
	d, err = apply(ctx, m.ledger, peerK, peers)
	errs, del = append(errs, err), append(del, d)
	d, err = apply(ctx, m.ledger, l2K, l2s)
	errs, del = append(errs, err), append(del, d)
	d, err = apply(ctx, m.ledger, bgpK, bgps)
	errs, del = append(errs, err), append(del, d)
	for i := len(del) - 1; i >= 0; i-- {
		errs = append(errs, del[i]())
	}
	for _, o := range outcomes {
		errs = append(errs, m.writeStatus(ctx, o))
	}
	return errors.Join(errs...)
}

var allFields = &fieldmaskpb.FieldMask{Paths: []string{"*"}}

// poolIDTaken is an IPAddressPool whose IPAM pool ID is a pool that is
// not this tenant's IPAddressPool: pool IDs are "{tenant}-{name}", so
// tenant "a-b"'s pool "c" and tenant "a"'s pool "b-c" are both "a-b-c".
// Nothing is overwritten; the IPAddressPool stays out of the IPAM until it
// is renamed.
type poolIDTaken struct {
	id     string
	tenant string // the tenant whose IPAddressPool the pool is; "" unknown (made otherwise, or not readable)
	err    error  // the IPAM's refusal
}

func (e *poolIDTaken) Error() string {
	if e.tenant != "" {
		return fmt.Sprintf("IPAM pool ID %q is already tenant %q's IPAddressPool (pool IDs are {tenant}-{name}, and the two give the same ID); rename this IPAddressPool", e.id, e.tenant)
	}
	return fmt.Sprintf("IPAM pool ID %q is already another pool (pool IDs are {tenant}-{name}: another tenant's IPAddressPool can give the same ID, or the pool was made by other means); rename this IPAddressPool", e.id)
}

func (e *poolIDTaken) Unwrap() error { return e.err }

func owned(id string) bool { return strings.HasPrefix(id, metallb.ResourcePrefix) }

func lastPart(name string) string { return name[strings.LastIndexByte(name, '/')+1:] }

func (m *metallbSync) poolKind(tenant string) kindOps[*ipamv1.Pool] {
	pc := m.c.ipam.Pools
	filter := fmt.Sprintf("labels.%q = %q AND labels.%q = %q", metallb.LabelTenant, tenant, metallb.LabelSource, metallb.SourceValue)
	return kindOps[*ipamv1.Pool]{
		kind: KindIPAddressPool,
		list: func(ctx context.Context) (map[string]*ipamv1.Pool, error) {
			all, err := listAll(ctx, func(ctx context.Context, token string) ([]*ipamv1.Pool, string, error) {
				r, err := pc.ListPools(ctx, &ipamv1.ListPoolsRequest{PageSize: 1000, PageToken: token, Filter: filter})
				return r.GetPools(), r.GetNextPageToken(), err
			})
			out := map[string]*ipamv1.Pool{}
			for _, p := range all {
				out[lastPart(p.GetName())] = p
			}
			return out, err
		},
		create: func(ctx context.Context, id string, p *ipamv1.Pool) error {
			_, err := pc.CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: id, Pool: p})
			if lb.ReasonOf(err) == "ALREADY_EXISTS" {
				// Not this tenant's IPAddressPool (those were listed):
				// say whose it is.
				taken := &poolIDTaken{id: id, err: err}
				if got, gerr := pc.GetPool(ctx, &ipamv1.GetPoolRequest{Name: "pools/" + id}); gerr == nil {
					labels := got.GetPool().GetLabels()
					if labels[metallb.LabelSource] == metallb.SourceValue {
						taken.tenant = labels[metallb.LabelTenant]
					}
				}
				return taken
			}
			return err
		},
		update: func(ctx context.Context, id string, p *ipamv1.Pool) error {
			p = proto.CloneOf(p)
			p.Name = "pools/" + id
			_, err := pc.UpdatePool(ctx, &ipamv1.UpdatePoolRequest{Pool: p, UpdateMask: allFields})
			return err
		},
		// A deleted IPAddressPool takes its addresses with it, as in
		// MetalLB: the IPAM pool is deleted with force (its allocations
		// released, so that the IPAM agrees with Kubernetes), each Service
		// that had an address from it is told why with an Event, and gets
		// an address from another pool if one serves it.
		delete: func(ctx context.Context, id string) error {
			m.poolDeleted(ctx, id)
			_, err := pc.DeletePool(ctx, &ipamv1.DeletePoolRequest{Name: "pools/" + id, Force: true})
			if lb.ReasonOf(err) == "NOT_FOUND" {
				return nil
			}
			return err
		},
		// New or larger pools may satisfy Services that failed to get an
		// address: the batch after the import tries those again now
		// instead of after their back-off.
		after: func(context.Context, []string) { m.poolsChanged = true },
	}
}

func (m *metallbSync) l2Kind(an ipamv1.AnnouncementServiceClient, parent string) kindOps[*ipamv1.L2Advertisement] {
	return kindOps[*ipamv1.L2Advertisement]{
		kind: KindL2Advertisement,
		list: func(ctx context.Context) (map[string]*ipamv1.L2Advertisement, error) {
			all, err := listAll(ctx, func(ctx context.Context, token string) ([]*ipamv1.L2Advertisement, string, error) {
				r, err := an.ListL2Advertisements(ctx, &ipamv1.ListL2AdvertisementsRequest{Parent: parent, PageSize: 1000, PageToken: token})
				return r.GetL2Advertisements(), r.GetNextPageToken(), err
			})
			return byOwnedID(all, (*ipamv1.L2Advertisement).GetName), err
		},
		create: func(ctx context.Context, id string, v *ipamv1.L2Advertisement) error {
			_, err := an.CreateL2Advertisement(ctx, &ipamv1.CreateL2AdvertisementRequest{Parent: parent, L2AdvertisementId: id, L2Advertisement: v})
			return err
		},
		update: func(ctx context.Context, id string, v *ipamv1.L2Advertisement) error {
			v = proto.CloneOf(v)
			v.Name = parent + "/l2Advertisements/" + id
			_, err := an.UpdateL2Advertisement(ctx, &ipamv1.UpdateL2AdvertisementRequest{L2Advertisement: v, UpdateMask: allFields})
			return err
		},
		delete: func(ctx context.Context, id string) error {
			_, err := an.DeleteL2Advertisement(ctx, &ipamv1.DeleteL2AdvertisementRequest{Name: parent + "/l2Advertisements/" + id})
			return ignoreNotFound(err)
		},
		conditions: (*ipamv1.L2Advertisement).GetConditions,
	}
}

func (m *metallbSync) bgpKind(an ipamv1.AnnouncementServiceClient, parent string) kindOps[*ipamv1.BGPAdvertisement] {
	return kindOps[*ipamv1.BGPAdvertisement]{
		kind: KindBGPAdvertisement,
		list: func(ctx context.Context) (map[string]*ipamv1.BGPAdvertisement, error) {
			all, err := listAll(ctx, func(ctx context.Context, token string) ([]*ipamv1.BGPAdvertisement, string, error) {
				r, err := an.ListBGPAdvertisements(ctx, &ipamv1.ListBGPAdvertisementsRequest{Parent: parent, PageSize: 1000, PageToken: token})
				return r.GetBgpAdvertisements(), r.GetNextPageToken(), err
			})
			return byOwnedID(all, (*ipamv1.BGPAdvertisement).GetName), err
		},
		create: func(ctx context.Context, id string, v *ipamv1.BGPAdvertisement) error {
			_, err := an.CreateBGPAdvertisement(ctx, &ipamv1.CreateBGPAdvertisementRequest{Parent: parent, BgpAdvertisementId: id, BgpAdvertisement: v})
			return err
		},
		update: func(ctx context.Context, id string, v *ipamv1.BGPAdvertisement) error {
			v = proto.CloneOf(v)
			v.Name = parent + "/bgpAdvertisements/" + id
			_, err := an.UpdateBGPAdvertisement(ctx, &ipamv1.UpdateBGPAdvertisementRequest{BgpAdvertisement: v, UpdateMask: allFields})
			return err
		},
		delete: func(ctx context.Context, id string) error {
			_, err := an.DeleteBGPAdvertisement(ctx, &ipamv1.DeleteBGPAdvertisementRequest{Name: parent + "/bgpAdvertisements/" + id})
			return ignoreNotFound(err)
		},
		conditions: (*ipamv1.BGPAdvertisement).GetConditions,
	}
}

func (m *metallbSync) peerKind(an ipamv1.AnnouncementServiceClient, parent string) kindOps[*ipamv1.BGPPeer] {
	return kindOps[*ipamv1.BGPPeer]{
		kind: KindBGPPeer,
		list: func(ctx context.Context) (map[string]*ipamv1.BGPPeer, error) {
			all, err := listAll(ctx, func(ctx context.Context, token string) ([]*ipamv1.BGPPeer, string, error) {
				r, err := an.ListBGPPeers(ctx, &ipamv1.ListBGPPeersRequest{Parent: parent, PageSize: 1000, PageToken: token})
				return r.GetBgpPeers(), r.GetNextPageToken(), err
			})
			return byOwnedID(all, (*ipamv1.BGPPeer).GetName), err
		},
		create: func(ctx context.Context, id string, v *ipamv1.BGPPeer) error {
			_, err := an.CreateBGPPeer(ctx, &ipamv1.CreateBGPPeerRequest{Parent: parent, BgpPeerId: id, BgpPeer: v})
			return err
		},
		update: func(ctx context.Context, id string, v *ipamv1.BGPPeer) error {
			v = proto.CloneOf(v)
			v.Name = parent + "/bgpPeers/" + id
			_, err := an.UpdateBGPPeer(ctx, &ipamv1.UpdateBGPPeerRequest{BgpPeer: v, UpdateMask: allFields})
			return err
		},
		delete: func(ctx context.Context, id string) error {
			_, err := an.DeleteBGPPeer(ctx, &ipamv1.DeleteBGPPeerRequest{Name: parent + "/bgpPeers/" + id})
			return ignoreNotFound(err)
		},
		conditions: (*ipamv1.BGPPeer).GetConditions,
	}
}

func (m *metallbSync) bfdKind(an ipamv1.AnnouncementServiceClient, parent string) kindOps[*ipamv1.BFDProfile] {
	return kindOps[*ipamv1.BFDProfile]{
		kind: KindBFDProfile,
		list: func(ctx context.Context) (map[string]*ipamv1.BFDProfile, error) {
			all, err := listAll(ctx, func(ctx context.Context, token string) ([]*ipamv1.BFDProfile, string, error) {
				r, err := an.ListBFDProfiles(ctx, &ipamv1.ListBFDProfilesRequest{Parent: parent, PageSize: 1000, PageToken: token})
				return r.GetBfdProfiles(), r.GetNextPageToken(), err
			})
			return byOwnedID(all, (*ipamv1.BFDProfile).GetName), err
		},
		create: func(ctx context.Context, id string, v *ipamv1.BFDProfile) error {
			_, err := an.CreateBFDProfile(ctx, &ipamv1.CreateBFDProfileRequest{Parent: parent, BfdProfileId: id, BfdProfile: v})
			return err
		},
		update: func(ctx context.Context, id string, v *ipamv1.BFDProfile) error {
			v = proto.CloneOf(v)
			v.Name = parent + "/bfdProfiles/" + id
			_, err := an.UpdateBFDProfile(ctx, &ipamv1.UpdateBFDProfileRequest{BfdProfile: v, UpdateMask: allFields})
			return err
		},
		delete: func(ctx context.Context, id string) error {
			_, err := an.DeleteBFDProfile(ctx, &ipamv1.DeleteBFDProfileRequest{Name: parent + "/bfdProfiles/" + id})
			return ignoreNotFound(err)
		},
	}
}

func (m *metallbSync) communityKind(an ipamv1.AnnouncementServiceClient, parent string) kindOps[*ipamv1.Community] {
	return kindOps[*ipamv1.Community]{
		kind: KindCommunity,
		list: func(ctx context.Context) (map[string]*ipamv1.Community, error) {
			all, err := listAll(ctx, func(ctx context.Context, token string) ([]*ipamv1.Community, string, error) {
				r, err := an.ListCommunities(ctx, &ipamv1.ListCommunitiesRequest{Parent: parent, PageSize: 1000, PageToken: token})
				return r.GetCommunities(), r.GetNextPageToken(), err
			})
			return byOwnedID(all, (*ipamv1.Community).GetName), err
		},
		create: func(ctx context.Context, id string, v *ipamv1.Community) error {
			_, err := an.CreateCommunity(ctx, &ipamv1.CreateCommunityRequest{Parent: parent, CommunityId: id, Community: v})
			return err
		},
		update: func(ctx context.Context, id string, v *ipamv1.Community) error {
			v = proto.CloneOf(v)
			v.Name = parent + "/communities/" + id
			_, err := an.UpdateCommunity(ctx, &ipamv1.UpdateCommunityRequest{Community: v, UpdateMask: allFields})
			return err
		},
		delete: func(ctx context.Context, id string) error {
			_, err := an.DeleteCommunity(ctx, &ipamv1.DeleteCommunityRequest{Name: parent + "/communities/" + id})
			return ignoreNotFound(err)
		},
	}
}

func byOwnedID[T any](all []T, name func(T) string) map[string]T {
	out := map[string]T{}
	for _, v := range all {
		if id := lastPart(name(v)); owned(id) {
			out[id] = v
		}
	}
	return out
}

// password reads a BGPPeer's passwordSecret.
func (m *metallbSync) password(ctx context.Context) metallb.PasswordLookup {
	return func(namespace, name string) (string, error) {
		s, err := m.c.kube.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("read Secret %s/%s: %w", namespace, name, err)
		}
		pw, ok := s.Data[corev1.BasicAuthPasswordKey]
		if !ok {
			return "", fmt.Errorf("secret %s/%s has no key %q", namespace, name, corev1.BasicAuthPasswordKey)
		}
		return string(pw), nil
	}
}

// writeStatus writes a MetalLB object's conditions (and, for an
// IPAddressPool, its usage) when they changed.
func (m *metallbSync) writeStatus(ctx context.Context, o *outcome) error {
	if o.kind == KindIPAddressPool && o.err == nil {
		p, err := m.c.ipam.Pools.GetPool(ctx, &ipamv1.GetPoolRequest{Name: "pools/" + metallb.PoolID(m.c.cfg.Tenant, o.obj.GetNamespace(), o.obj.GetName())})
		if err == nil {
			o.usage = metallb.PoolStatus(p.GetPool().GetStatus())
		}
	}
	old, _ := o.obj.Object["status"].(map[string]any)
	oldConds := map[string]map[string]any{}
	if list, ok := old["conditions"].([]any); ok {
		for _, c := range list {
			if cm, ok := c.(map[string]any); ok {
				t, _ := cm["type"].(string)
				oldConds[t] = cm
			}
		}
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	cond := func(typ string, ok bool, why, msg string) map[string]any {
		st := "False"
		if ok {
			st = "True"
		}
		c := map[string]any{"type": typ, "status": st, "reason": why, "message": msg, "observedGeneration": o.obj.GetGeneration(), "lastTransitionTime": now}
		if prev, found := oldConds[typ]; found && prev["status"] == st {
			c["lastTransitionTime"] = prev["lastTransitionTime"]
		}
		return c
	}
	errReason, errMsg := m.explain(o.err)
	var conds []any
	switch {
	case o.err != nil:
		conds = append(conds, cond("Synced", false, errReason, errMsg))
	case o.warning != "":
		conds = append(conds, cond("Synced", true, reason.PartlySupported, o.warning))
	default:
		conds = append(conds, cond("Synced", true, reason.Synced, "in the IPAM as tenant "+m.c.cfg.Tenant+"'s"))
	}
	for _, c := range o.conditions {
		conds = append(conds, cond(c.GetType(), c.GetStatus(), c.GetReason(), c.GetMessage()))
	}
	status := map[string]any{"conditions": conds}
	maps.Copy(status, o.usage)
	if statusEqual(old, status) {
		return nil
	}
	if o.err != nil {
		if prev := oldConds["Synced"]; prev == nil || prev["status"] != "False" || prev["message"] != errMsg {
			m.c.recorder.Eventf(o.obj, corev1.EventTypeWarning, reason.ImportFailed, "Not applied to the IPAM: %s (%s)", errMsg, errReason)
		}
	}
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = m.c.kube.dynamic.Resource(m.gvrs[o.kind]).Namespace(o.obj.GetNamespace()).Patch(ctx, o.obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{FieldManager: Component}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("write status of %s %s: %w", o.kind, o.obj.GetName(), err)
	}
	return nil
}

// statusEqual compares two statuses as JSON (maps marshal with sorted
// keys, and int64 and float64 numbers print alike).
func statusEqual(a, b map[string]any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// explain returns the reason and message of an import failure: a spec the
// adapter cannot convert, or the IPAM's refusal (see lb.Explain).
func (m *metallbSync) explain(err error) (string, string) {
	if err == nil {
		return "", ""
	}
	var se *metallb.SpecError
	if errors.As(err, &se) {
		return reason.InvalidSpec, se.Error()
	}
	var taken *poolIDTaken
	if errors.As(err, &taken) {
		return reason.PoolIDTaken, taken.Error()
	}
	return lb.Explain(err, m.c.cfg.Tenant)
}

// poolDeleted records a PoolDeleted Event on every Service that holds an
// address of the IPAM pool id, which is about to be deleted with its
// IPAddressPool.
func (m *metallbSync) poolDeleted(ctx context.Context, id string) {
	allocs, err := listAll(ctx, func(ctx context.Context, token string) ([]*ipamv1.Allocation, string, error) {
		r, err := m.c.ipam.Allocations.ListAllocations(ctx, &ipamv1.ListAllocationsRequest{
			Parent: "tenants/" + m.c.cfg.Tenant, PageSize: 1000, PageToken: token, Filter: fmt.Sprintf("pool = %q", id),
		})
		return r.GetAllocations(), r.GetNextPageToken(), err
	})
	if err != nil {
		m.c.logger.WarnContext(ctx, "cannot list the allocations of a deleted pool", "pool", id, "error", err)
		return
	}
	name := strings.TrimPrefix(id, m.c.cfg.Tenant+"-")
	for _, a := range allocs {
		obj, ok, _ := m.c.services.GetIndexer().GetByKey(a.GetOwner())
		svc, isSvc := obj.(*corev1.Service)
		if !ok || !isSvc {
			continue
		}
		m.c.recorder.Eventf(svc, corev1.EventTypeWarning, reason.PoolDeleted,
			"The IPAddressPool %s that %s came from was deleted: the address is no longer this Service's (as with MetalLB); it gets one from another pool if one serves it",
			name, fmtAddrs(a.GetAddresses()))
		m.c.logger.InfoContext(ctx, "pool deleted under a Service", "pool", id, "service", a.GetOwner(), "addresses", a.GetAddresses())
	}
}
