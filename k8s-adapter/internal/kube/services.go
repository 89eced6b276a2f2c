package kube

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/beaconlb/beacon/k8s-adapter/internal/lb"
	"github.com/beaconlb/beacon/k8s-adapter/internal/metallb"
	"github.com/beaconlb/beacon/k8s-adapter/internal/reason"
	"github.com/beaconlb/beacon/k8s-adapter/internal/request"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// syncService makes one Service's allocation, status, annotation and
// finalizer agree with what it asks for.
func (c *Controller) syncService(ctx context.Context, key string) error {
	obj, exists, err := c.services.GetIndexer().GetByKey(key)
	if err != nil {
		return err
	}
	if !exists {
		return c.releaseOwner(ctx, key)
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return fmt.Errorf("%s: cached object is a %T", key, obj)
	}
	s := toRequest(svc)
	if !c.cfg.Filter.Wants(s) {
		return c.stopServing(ctx, svc)
	}
	return c.serve(ctx, svc, s)
}

// releaseOwner releases the allocation of a Service that no longer exists.
// Only owners known to hold an allocation are released: a Service let go
// by stopServing was released already, and releasing it again would end
// its hold (the IPAM ends a released owner's hold when asked to release it
// again).
func (c *Controller) releaseOwner(ctx context.Context, owner string) error {
	v, ok := c.held.Load(owner)
	if !ok {
		c.memos.Delete(owner)
		return nil
	}
	hp, ok := v.(holdPlan)
	if !ok {
		hp = c.holdFor(nil, "")
	}
	rel, err := c.lb.Release(ctx, owner, hp.hold)
	if err != nil {
		return err
	}
	addrs := rel.Addresses
	c.held.Delete(owner)
	c.memos.Delete(owner)
	if len(addrs) > 0 {
		c.logger.InfoContext(ctx, "released addresses of a deleted service", "service", owner, "addresses", addrs)
	}
	return nil
}

// stopServing releases a Service that is no longer the adapter's (deleted,
// another type or class) and takes back what the adapter wrote on it.
func (c *Controller) stopServing(ctx context.Context, svc *corev1.Service) error {
	key := svc.Namespace + "/" + svc.Name
	_, isHeld := c.held.Load(key)
	// The Service is this adapter's to let go if it holds an allocation for
	// it, or wrote its tenant on it (then a crash may have come between the
	// release and taking back the finalizer).
	marked := svc.Annotations[request.TenantAnnotation] == c.cfg.Tenant
	if !isHeld && !marked {
		return nil
	}
	_, annotated := svc.Annotations[request.PoolAnnotation]
	finalized := slices.Contains(svc.Finalizers, Finalizer)
	hp := c.holdFor(svc.Annotations, svc.Annotations[request.PoolAnnotation])
	rel, err := c.lb.Release(ctx, key, hp.hold)
	if err != nil {
		_, why := lb.Explain(err, c.cfg.Tenant)
		c.recorder.Eventf(svc, corev1.EventTypeWarning, reason.ReleaseFailed, "Releasing the Service's address failed: %s", why)
		return err
	}
	addrs := rel.Addresses
	c.held.Delete(key)
	c.memos.Delete(key)
	why := "it is no longer a LoadBalancer Service of class " + c.cfg.Filter.Class
	if svc.DeletionTimestamp != nil {
		why = "the Service is being deleted"
	}
	if len(addrs) > 0 {
		kept := "free at once (" + hp.why + ")"
		if !rel.HoldEnds.IsZero() {
			kept = fmt.Sprintf("kept for this Service until %s (a release hold: %s; end it now with `beaconctl alloc release %s --tenant %s`)",
				rel.HoldEnds.UTC().Format(time.RFC3339), hp.why, key, c.cfg.Tenant)
		}
		c.recorder.Eventf(svc, corev1.EventTypeNormal, reason.IPReleased, "Released %s: %s; %s", strings.Join(addrs, ", "), why, kept)
		c.logger.InfoContext(ctx, "released", "service", key, "addresses", addrs, "why", why, "hold_ends", rel.HoldEnds)
	}
	rv := svc.ResourceVersion
	if svc.DeletionTimestamp == nil && annotated && len(svc.Status.LoadBalancer.Ingress) > 0 && ingressWithin(svc, addrs) {
		if rv, err = c.patchStatus(ctx, svc, nil); err != nil {
			return err
		}
	}
	if annotated || finalized || marked {
		finalizers := slices.DeleteFunc(slices.Clone(svc.Finalizers), func(f string) bool { return f == Finalizer })
		annotations := map[string]any{request.PoolAnnotation: nil, request.MetalLBPoolAnnotation: nil, request.TenantAnnotation: nil}
		if _, err := c.patchMeta(ctx, svc, rv, finalizers, annotations); err != nil {
			return err
		}
	}
	return nil
}

// ingressWithin reports whether the Service's ingress IPs are among addrs,
// or addrs is empty (released earlier): then the status is the adapter's
// to clear.
func ingressWithin(svc *corev1.Service, addrs []string) bool {
	if len(addrs) == 0 {
		return true
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if !slices.Contains(addrs, in.IP) {
			return false
		}
	}
	return true
}

// serve allocates for a Service that is the adapter's.
func (c *Controller) serve(ctx context.Context, svc *corev1.Service, s *request.Service) error {
	key := s.Owner()
	m := c.memoOf(key, svc.UID)
	if m != nil && slices.Contains(m.stale, svc.ResourceVersion) {
		// The cache has not yet seen this adapter's last write to the
		// Service; the event of that write queues it again.
		return nil
	}
	opts := request.Options{
		MetalLBPool: func(name string) string { return metallb.PoolID(c.cfg.Tenant, c.cfg.MetalLBNamespace, name) },
	}
	if obj, ok, _ := c.namespaces.GetIndexer().GetByKey(svc.Namespace); ok {
		if ns, ok := obj.(*corev1.Namespace); ok {
			opts.NamespaceLabels = ns.Labels
		}
	}
	if s.ExternalTrafficPolicy == "Local" || request.IsGlobal(s.Annotations) {
		opts.EndpointNodes = c.endpointNodes(key)
	}
	want, warns, err := request.Build(s, opts)
	for _, w := range warns {
		c.recorder.Event(svc, corev1.EventTypeWarning, w.Reason, w.Message)
	}
	if _, herr := request.ReleaseHold(svc.Annotations); herr != nil {
		var he *request.Error
		if errors.As(herr, &he) {
			c.recorder.Event(svc, corev1.EventTypeWarning, he.Reason, he.Message+"; the default hold applies")
		}
	}
	var rerr *request.Error
	if errors.As(err, &rerr) {
		// Nothing to retry until the Service changes; keep what it holds.
		c.recorder.Event(svc, corev1.EventTypeWarning, rerr.Reason, rerr.Message)
		c.logger.InfoContext(ctx, "service asks for something invalid", "service", key, "reason", rerr.Reason, "error", rerr.Message)
		return nil
	}
	if err != nil {
		return err
	}

	prev := ingressIPs(svc)
	sum, err := hashOf(want)
	if err != nil {
		return err
	}
	var res lb.Result
	at := time.Now()
	if m != nil && m.want == sum && time.Since(m.at) < memoTTL {
		// Asked the IPAM moments ago with the same request.
		res.Allocation, at = m.alloc, m.at
	} else {
		if _, isHeld := c.held.Load(key); !isHeld && !c.gate.admit(key) {
			// Configuration is being imported: allocate in the batch after
			// it, in order of age (see gate).
			return nil
		}
		res, err = c.ensure(ctx, svc, key, want, prev)
		c.gate.decided(key)
		if err != nil {
			return err
		}
	}
	m = &memo{uid: svc.UID, want: sum, alloc: res.Allocation, at: at}
	c.memos.Store(key, m)
	return c.publish(ctx, svc, key, want, res, prev, m)
}

// ensure asks the IPAM for the Service's allocation.
func (c *Controller) ensure(ctx context.Context, svc *corev1.Service, key string, want *ipamv1.Allocation, prev []string) (lb.Result, error) {
	if k := want.GetSharingKey(); k != "" {
		// The IPAM makes sharers asking at the same moment share (the later
		// ones wait or retry); asking one at a time spares it that work.
		mu := c.sharingLock(k)
		mu.Lock()
		defer mu.Unlock()
	}
	var res lb.Result
	var err error
	if c.adoptable(key, want, prev) {
		res, err = c.lb.Adopt(ctx, want, prev)
	} else {
		res, err = c.lb.Ensure(ctx, want)
	}
	if le := res.NotAdopted; le != nil {
		r, why := lb.Explain(le, c.cfg.Tenant)
		c.recorder.Eventf(svc, corev1.EventTypeWarning, reason.IPNotKept, "Not keeping %s from the Service's status: %s (%s)", fmtAddrs(prev), why, r)
		c.logger.InfoContext(ctx, "status addresses not kept", "service", key, "addresses", prev, "reason", le.Reason, "error", le.Message)
	}
	if res.Adopted {
		pool := strings.TrimPrefix(res.Allocation.GetPool(), "pools/")
		c.recorder.Eventf(svc, corev1.EventTypeNormal, reason.IPAllocated, "Kept IP %s from the Service's status (pool %s)", fmtAddrs(res.Allocation.GetAddresses()), pool)
		c.logger.InfoContext(ctx, "status addresses kept", "service", key, "addresses", res.Allocation.GetAddresses(), "pool", pool)
	}
	if len(res.Replaced) > 0 {
		c.held.Delete(key)
	}
	if err != nil {
		r, why := lb.Explain(err, c.cfg.Tenant)
		c.recorder.Eventf(svc, corev1.EventTypeWarning, reason.AllocationFailed, "Failed to allocate an address: %s (%s)", why, r)
		var le *lb.Error
		refused := errors.As(err, &le) && !le.Retryable()
		// The addresses in the status are no longer the Service's when they
		// were given up just now, or when the IPAM refused to allocate (a
		// refused update leaves res.Allocation set). The IPAM answers an
		// owner that holds an allocation with it, so a refused allocation
		// means the owner holds none: it was released or moved behind the
		// adapter's back. Do not advertise them; MetalLB, too, clears the
		// status of a Service it cannot allocate for.
		if len(prev) > 0 && (len(res.Replaced) > 0 || refused && res.Allocation == nil) {
			if _, perr := c.patchStatus(ctx, svc, nil); perr != nil {
				err = errors.Join(err, perr)
			}
		}
		if refused {
			c.logger.InfoContext(ctx, "allocation refused", "service", key, "reason", le.Reason, "error", le.Message)
		}
		c.memos.Delete(key)
		return res, err
	}
	c.held.Store(key, c.holdFor(svc.Annotations, strings.TrimPrefix(res.Allocation.GetPool(), "pools/")))
	return res, nil
}

// holdPlan is how a Service's addresses are released: kept for it for hold
// (nil: the adapter's --release-hold, else the IPAM's default; 0: free at
// once), and why, for its Event.
type holdPlan struct {
	hold *time.Duration
	why  string
}

// holdFor returns how the addresses of a Service with these annotations,
// allocated from pool (an IPAM pool ID, "" if unknown), are released: as
// its beacon.io/release-hold annotation says; else, for a Service managed
// through MetalLB (its annotations, or a pool imported from an
// IPAddressPool), --metallb-release-hold (0 by default: free at once, as
// MetalLB frees them); else the adapter's --release-hold.
func (c *Controller) holdFor(annotations map[string]string, pool string) holdPlan {
	if h, err := request.ReleaseHold(annotations); err == nil && h != nil {
		return holdPlan{h, "as its " + request.ReleaseHoldAnnotation + " annotation asks"}
	}
	if request.UsesMetalLB(annotations) || (pool != "" && c.metallbPoolName(pool) != pool) {
		h := c.cfg.MetalLBReleaseHold
		if h == 0 {
			return holdPlan{&h, "managed through MetalLB, whose addresses are free when their Service is deleted; opt in to holds with the " + request.ReleaseHoldAnnotation + " annotation"}
		}
		return holdPlan{&h, "managed through MetalLB, held as --metallb-release-hold says"}
	}
	return holdPlan{c.cfg.ReleaseHold, "the adapter's release hold"}
}

// metallbPoolName returns the name of the MetalLB IPAddressPool the IPAM
// pool id was imported from, or id if it was not imported (MetalLB's
// ip-allocated-from-pool annotation names the IPAddressPool).
func (c *Controller) metallbPoolName(id string) string {
	if c.metallb == nil {
		return id
	}
	for _, u := range c.metallb.objects(KindIPAddressPool) {
		if metallb.PoolID(c.cfg.Tenant, u.GetNamespace(), u.GetName()) == id {
			return u.GetName()
		}
	}
	return id
}

// adoptable reports whether a Service's status addresses should be asked
// for (see lb.Client.Adopt): it shows addresses, asks for none in
// particular, and the adapter knows of no allocation of its in the IPAM
// (the resync at start lists them). So a Service that MetalLB gave an
// address keeps it when the adapter takes over, as MetalLB itself keeps it
// across restarts by rebuilding its state from the Services' status.
func (c *Controller) adoptable(key string, want *ipamv1.Allocation, prev []string) bool {
	if len(prev) == 0 || len(want.GetRequestedAddresses()) > 0 || want.GetAddressCount() > 1 {
		// Several addresses per family cannot be asked for by address (the
		// IPAM takes one requested address per family): such an owner the
		// IPAM does not hold is allocated anew.
		return false
	}
	_, isHeld := c.held.Load(key)
	return !isHeld
}

// publish writes the allocation into the Service: status, pool and tenant
// annotations, finalizer, Events.
func (c *Controller) publish(ctx context.Context, svc *corev1.Service, key string, want *ipamv1.Allocation, res lb.Result, prev []string, m *memo) error {
	rv := svc.ResourceVersion
	var stale []string
	addrs := res.Allocation.GetAddresses()
	pool := strings.TrimPrefix(res.Allocation.GetPool(), "pools/")

	if !statusIs(svc, addrs) {
		next, err := c.patchStatus(ctx, svc, addrs)
		if err != nil {
			return err
		}
		stale, rv = append(stale, rv), next
		switch {
		case len(prev) == 0:
			c.recorder.Eventf(svc, corev1.EventTypeNormal, reason.IPAllocated, "Assigned IP %s from pool %s", fmtAddrs(addrs), pool)
		case !slices.Equal(prev, addrs):
			c.recorder.Eventf(svc, corev1.EventTypeNormal, reason.IPChanged, "Changed IP from %s to %s (pool %s)", fmtAddrs(prev), fmtAddrs(addrs), pool)
		}
		c.logger.InfoContext(ctx, "status written", "service", key, "addresses", addrs, "pool", pool, "previous", prev)
	}
	if len(res.Updated) > 0 {
		fields := slices.DeleteFunc(slices.Clone(res.Updated), func(f string) bool { return f == "endpoint_nodes" })
		if len(fields) > 0 {
			c.recorder.Eventf(svc, corev1.EventTypeNormal, reason.AllocationUpdated, "Updated the allocation's %s", strings.Join(fields, ", "))
		}
		c.logger.DebugContext(ctx, "allocation updated", "service", key, "fields", res.Updated, "endpoint_nodes", want.GetEndpointNodes())
	}
	mlbPool := c.metallbPoolName(pool)
	if !slices.Contains(svc.Finalizers, Finalizer) || svc.Annotations[request.PoolAnnotation] != pool ||
		svc.Annotations[request.MetalLBPoolAnnotation] != mlbPool || svc.Annotations[request.TenantAnnotation] != c.cfg.Tenant {
		finalizers := svc.Finalizers
		if !slices.Contains(finalizers, Finalizer) {
			finalizers = append(slices.Clone(finalizers), Finalizer)
		}
		annotations := map[string]any{request.PoolAnnotation: pool, request.MetalLBPoolAnnotation: mlbPool, request.TenantAnnotation: c.cfg.Tenant}
		if _, err := c.patchMeta(ctx, svc, rv, finalizers, annotations); err != nil {
			return err
		}
		stale = append(stale, rv)
	}
	// The versions before the newest write are stale views of the Service.
	m.stale = stale
	return nil
}

// memoTTL is how long a successful answer of the IPAM is reused for an
// unchanged request. Within it, the updates a Service goes through as the
// adapter writes its status and finalizer cost no IPAM call; after it, and
// at every restart, the IPAM is asked again.
const memoTTL = 30 * time.Second

// memo is what the adapter last did for one Service.
type memo struct {
	uid   types.UID
	want  [32]byte           // hash of the request
	alloc *ipamv1.Allocation // the IPAM's answer to it
	at    time.Time          // when it answered
	// stale are resourceVersions older than the adapter's last write to
	// the Service: a reconcile that sees one of them in the cache waits for
	// the event of that write instead of writing again.
	stale []string
}

func (c *Controller) memoOf(key string, uid types.UID) *memo {
	v, ok := c.memos.Load(key)
	if !ok {
		return nil
	}
	m, _ := v.(*memo)
	if m == nil || m.uid != uid {
		return nil
	}
	return m
}

func hashOf(a *ipamv1.Allocation) ([32]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(a)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}

// sharingLock returns the lock that serializes allocations under one
// sharing key (striped: keys may share a lock).
func (c *Controller) sharingLock(key string) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return &c.sharing[h.Sum32()%uint32(len(c.sharing))]
}

func fmtAddrs(a []string) string { return "[" + strings.Join(a, ", ") + "]" }

// endpointNodes returns the nodes with a ready endpoint of the Service.
func (c *Controller) endpointNodes(key string) []string {
	objs, err := c.slices.GetIndexer().ByIndex(sliceIndex, key)
	if err != nil {
		return nil
	}
	var nodes []string
	for _, obj := range objs {
		es, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		for _, ep := range es.Endpoints {
			if ep.NodeName == nil || *ep.NodeName == "" {
				continue
			}
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			nodes = append(nodes, *ep.NodeName)
		}
	}
	slices.Sort(nodes)
	return slices.Compact(nodes)
}

func ingressIPs(svc *corev1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out = append(out, in.IP)
		}
	}
	return out
}

// statusIs reports whether the Service's status already lists exactly addrs
// as VIPs.
func statusIs(svc *corev1.Service, addrs []string) bool {
	in := svc.Status.LoadBalancer.Ingress
	if len(in) != len(addrs) {
		return false
	}
	for i, a := range addrs {
		if in[i].IP != a || in[i].Hostname != "" || in[i].IPMode == nil || *in[i].IPMode != corev1.LoadBalancerIPModeVIP {
			return false
		}
	}
	return true
}

// patchStatus sets status.loadBalancer.ingress to addrs (nil clears it) and
// returns the Service's new resourceVersion.
func (c *Controller) patchStatus(ctx context.Context, svc *corev1.Service, addrs []string) (string, error) {
	ingress := make([]map[string]any, 0, len(addrs))
	for _, a := range addrs {
		ingress = append(ingress, map[string]any{"ip": a, "ipMode": string(corev1.LoadBalancerIPModeVIP)})
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"loadBalancer": map[string]any{"ingress": ingress}}})
	if err != nil {
		return "", err
	}
	out, err := c.kube.client.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: Component}, "status")
	if apierrors.IsNotFound(err) {
		return "", nil // deleted meanwhile: the delete event releases it
	}
	if err != nil {
		return "", fmt.Errorf("write status of %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return out.ResourceVersion, nil
}

// patchMeta sets a Service's finalizers and some annotations (nil removes
// one) if its resourceVersion is still rv, and returns the new one. It is a
// JSON merge patch, which costs the API server less than a strategic merge
// patch; the resourceVersion keeps it from overwriting another writer's
// finalizers (a conflict is retried from a fresh cache).
func (c *Controller) patchMeta(ctx context.Context, svc *corev1.Service, rv string, finalizers []string, annotations map[string]any) (string, error) {
	if finalizers == nil {
		finalizers = []string{}
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": rv, "finalizers": finalizers, "annotations": annotations,
	}})
	if err != nil {
		return "", err
	}
	out, err := c.kube.client.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: Component})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("patch %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return out.ResourceVersion, nil
}

// toRequest copies what decides a Service's allocation.
func toRequest(svc *corev1.Service) *request.Service {
	s := &request.Service{
		Namespace: svc.Namespace, Name: svc.Name, UID: string(svc.UID),
		Labels: svc.Labels, Annotations: svc.Annotations,
		Type:                  string(svc.Spec.Type),
		LoadBalancerIP:        svc.Spec.LoadBalancerIP, //nolint:staticcheck // deprecated, still honoured as MetalLB does
		ExternalTrafficPolicy: string(svc.Spec.ExternalTrafficPolicy),
		Deleting:              svc.DeletionTimestamp != nil,
	}
	if svc.Spec.LoadBalancerClass != nil {
		s.Class = *svc.Spec.LoadBalancerClass
	}
	for _, f := range svc.Spec.IPFamilies {
		s.IPFamilies = append(s.IPFamilies, string(f))
	}
	if svc.Spec.IPFamilyPolicy != nil {
		s.IPFamilyPolicy = string(*svc.Spec.IPFamilyPolicy)
	}
	for _, p := range svc.Spec.Ports {
		s.Ports = append(s.Ports, request.Port{Port: p.Port, Protocol: string(p.Protocol)})
	}
	return s
}
