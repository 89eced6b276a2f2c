// Package kube is the adapter's Kubernetes side, and the only package that
// imports client-go: it watches Services, their namespaces and
// EndpointSlices with informers, reconciles each Service from a rate-limited
// work queue (level-based: every pass recomputes what the Service asks for
// and makes the IPAM and the Service's status agree), writes status, a pool
// annotation, a finalizer and Events, runs under a leader-election Lease, and
// syncs MetalLB's configuration resources into the IPAM.
//
// Only cmd/k8s-adapter and tests import this package.
package kube

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/beaconlb/beacon/k8s-adapter/internal/lb"
	"github.com/beaconlb/beacon/k8s-adapter/internal/request"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// Finalizer is put on every Service the adapter allocates for, so that its
// addresses are released before the Service disappears.
const Finalizer = "beacon.io/load-balancer"

// Component is the Event source and field manager.
const Component = "beacon-k8s-adapter"

// Cluster is a connection to one Kubernetes API server.
type Cluster struct {
	rest    *rest.Config
	client  kubernetes.Interface
	dynamic dynamic.Interface
}

// ConnectOptions say how to reach the API server.
type ConnectOptions struct {
	// Kubeconfig is a kubeconfig file; empty: the in-cluster config.
	Kubeconfig string
	// QPS and Burst limit the adapter's requests to the API server.
	QPS   float32
	Burst int
}

// Connect builds clients for the API server; it does not contact it.
func Connect(o ConnectOptions) (*Cluster, error) {
	var rc *rest.Config
	var err error
	if o.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	rc.QPS, rc.Burst = o.QPS, o.Burst
	rc.UserAgent = Component
	return newCluster(rc)
}

func newCluster(rc *rest.Config) (*Cluster, error) {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes dynamic client: %w", err)
	}
	return &Cluster{rest: rc, client: cs, dynamic: dyn}, nil
}

// Config is what a Controller does.
type Config struct {
	// Tenant is the cluster's IPAM tenant ("c1").
	Tenant string
	// Filter says which Services are the adapter's.
	Filter request.Filter
	// Workers reconcile Services concurrently (default 16).
	Workers int
	// ResyncPeriod re-queues every Service this often (0: never).
	ResyncPeriod time.Duration
	// ReleaseHold is how long a released Service's addresses stay reserved
	// for it; nil: the IPAM's default.
	ReleaseHold *time.Duration
	// MetalLBReleaseHold is ReleaseHold for Services managed through
	// MetalLB (its annotations, or a pool imported from an IPAddressPool):
	// 0, the default, frees their addresses at once, as MetalLB does. A
	// Service's beacon.io/release-hold annotation overrides both.
	MetalLBReleaseHold time.Duration
	// MetalLBNamespace is where MetalLB's configuration resources are read
	// (IPAddressPool, L2Advertisement, ...). Empty: they are not read.
	MetalLBNamespace string
	// MetalLBResync re-applies MetalLB's resources and refreshes their status
	// this often (default 30 s).
	MetalLBResync time.Duration
	// MetalLBBackoff is the first back-off of a MetalLB object the IPAM
	// refused (default 500 ms; it doubles per failure up to 30 s or this,
	// if longer). Each object backs off on its own; every other change is
	// applied at once.
	MetalLBBackoff time.Duration
	// MetalLBSettle is how long the import waits, after a change of
	// MetalLB's resources, for no further change (in all at most 2 s or 8
	// times MetalLBSettle), so that
	// objects applied together are imported together (default 250 ms).
	MetalLBSettle time.Duration
	// SyncNodes keeps the tenant's IPAM Nodes (their labels, for node
	// selectors and the exclude-from-external-load-balancers label) equal
	// to the cluster's Nodes.
	SyncNodes bool
	// NodeResync re-applies the Nodes' labels this often (default 30 s).
	NodeResync time.Duration
	// ConflictPoll is how often the allocations' conditions are read for
	// address conflicts to put on Services as Warning Events (default 10 s).
	ConflictPoll time.Duration
	// LeaderElection, if enabled, makes only the Lease holder reconcile.
	LeaderElection LeaderElection
}

// LeaderElection configures the Lease that picks the active replica.
type LeaderElection struct {
	Enabled   bool
	Namespace string
	Name      string
	// Identity of this replica; default: host name and a random suffix.
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// IPAM holds the IPAM's gRPC clients.
type IPAM struct {
	Allocations   ipamv1.AllocationServiceClient
	Pools         ipamv1.PoolServiceClient
	Announcements ipamv1.AnnouncementServiceClient
}

// Controller reconciles one cluster's Services (and MetalLB resources) into
// the IPAM. Create it with New and call Run once.
type Controller struct {
	cfg    Config
	kube   *Cluster
	ipam   IPAM
	lb     *lb.Client
	logger *slog.Logger

	factory    informers.SharedInformerFactory
	services   cache.SharedIndexInformer
	namespaces cache.SharedIndexInformer
	slices     cache.SharedIndexInformer
	queue      workqueue.TypedRateLimitingInterface[string]

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder

	metallb *metallbSync // nil when MetalLB resources are not read
	gate    *gate        // orders allocations after configuration changes
	nodes   *nodeSync    // nil when Nodes are not synced

	// held are the owners known to hold an allocation: from the resync at
	// start and every successful Ensure, until released.
	held sync.Map
	// memos remember what was last done per Service (see memo).
	memos sync.Map
	// sharing serializes allocations under one sharing key.
	sharing [64]sync.Mutex

	synced     atomic.Bool
	leading    atomic.Bool
	reconciles atomic.Uint64
	failures   atomic.Uint64
}

// New builds a Controller. It starts nothing.
func New(kc *Cluster, ipam IPAM, logger *slog.Logger, cfg Config) (*Controller, error) {
	if cfg.Tenant == "" {
		return nil, errors.New("tenant is required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 16
	}
	if cfg.MetalLBResync <= 0 {
		cfg.MetalLBResync = 30 * time.Second
	}
	if cfg.MetalLBSettle <= 0 {
		cfg.MetalLBSettle = 250 * time.Millisecond
	}
	if cfg.NodeResync <= 0 {
		cfg.NodeResync = 30 * time.Second
	}
	if cfg.ConflictPoll <= 0 {
		cfg.ConflictPoll = 10 * time.Second
	}
	c := &Controller{
		cfg: cfg, kube: kc, ipam: ipam, logger: logger, gate: newGate(),
		lb: lb.New(ipam.Allocations, cfg.Tenant, lb.Options{Hold: cfg.ReleaseHold}),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 60*time.Second),
			),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "services"},
		),
	}
	c.factory = informers.NewSharedInformerFactory(kc.client, cfg.ResyncPeriod)
	c.services = c.factory.Core().V1().Services().Informer()
	c.namespaces = c.factory.Core().V1().Namespaces().Informer()
	c.slices = c.factory.Discovery().V1().EndpointSlices().Informer()
	for _, inf := range []cache.SharedIndexInformer{c.services, c.namespaces, c.slices} {
		if err := inf.SetTransform(stripManagedFields); err != nil {
			return nil, err
		}
	}
	if err := c.slices.AddIndexers(cache.Indexers{sliceIndex: sliceServiceKey}); err != nil {
		return nil, err
	}
	if _, err := c.services.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, err
	}
	if _, err := c.namespaces.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: c.namespaceChanged,
	}); err != nil {
		return nil, err
	}
	if _, err := c.slices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.sliceChanged,
		UpdateFunc: func(_, obj any) { c.sliceChanged(obj) },
		DeleteFunc: c.sliceChanged,
	}); err != nil {
		return nil, err
	}
	c.broadcaster = record.NewBroadcaster()
	c.recorder = c.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component})
	if cfg.SyncNodes {
		ns, err := newNodeSync(c)
		if err != nil {
			return nil, err
		}
		c.nodes = ns
	}
	if cfg.MetalLBNamespace != "" {
		ms, err := newMetalLBSync(c)
		if err != nil {
			return nil, err
		}
		c.metallb = ms
	}
	return c, nil
}

// SetKlogLogger sends client-go's own logs (klog) to logger.
func SetKlogLogger(logger *slog.Logger) {
	klog.SetSlogLogger(logger)
}

// Run starts the informers, waits for their caches, then reconciles while
// this replica leads (always, with leader election off). It returns when
// ctx is done, or with an error when leadership is lost.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	sink := c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.client.CoreV1().Events("")})
	defer func() {
		sink.Stop()
		c.broadcaster.Shutdown()
	}()

	// Run returns with ctx still alive when leadership is lost: the
	// informers' context must end first (defers run last-in first-out), or
	// factory.Shutdown waits for them forever and the process never exits.
	ctx, cancel := context.WithCancel(ctx)
	c.factory.Start(ctx.Done())
	defer c.factory.Shutdown()
	defer cancel()
	synced := []cache.InformerSynced{c.services.HasSynced, c.namespaces.HasSynced, c.slices.HasSynced}
	if c.metallb != nil {
		c.metallb.start(ctx)
		synced = append(synced, c.metallb.hasSynced)
	}
	// The Node cache is not waited for here: without RBAC for Nodes it
	// never fills, and Services must not wait for it (see nodeSync.run).
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	c.synced.Store(true)
	c.logger.InfoContext(ctx, "caches synced", "services", len(c.services.GetStore().ListKeys()))

	if !c.cfg.LeaderElection.Enabled {
		return c.lead(ctx)
	}
	return c.runElected(ctx)
}

// lead does the active replica's work until ctx is done.
func (c *Controller) lead(ctx context.Context) error {
	c.leading.Store(true)
	defer c.leading.Store(false)
	start := time.Now()
	if err := c.resync(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	if c.metallb != nil {
		wg.Go(func() { c.metallb.run(ctx) })
	}
	if c.nodes != nil {
		wg.Go(func() { c.nodes.run(ctx) })
	}
	wg.Go(func() { c.followAllocations(ctx) })
	wg.Go(func() { c.followConflicts(ctx) })
	for range c.cfg.Workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	if c.metallb == nil || len(c.metallb.informers) == 0 {
		// No import to wait for: the Services that hold no allocation get
		// their turns now, oldest first (the MetalLB import runs its own
		// batch after each import).
		wg.Go(func() { c.runBatch(ctx, c.gate.generation(), true) })
	}
	c.logger.InfoContext(ctx, "reconciling", "workers", c.cfg.Workers, "resync_took", time.Since(start).String())
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

// resync queues every owner the IPAM holds an allocation for, so that
// allocations of Services deleted while no adapter ran are released (the
// informers already queued every existing Service).
func (c *Controller) resync(ctx context.Context) error {
	var allocs []*ipamv1.Allocation
	err := retry(ctx, c.logger, "list allocations", func() error {
		var err error
		allocs, err = c.lb.List(ctx)
		return err
	})
	if err != nil {
		return err
	}
	orphans := 0
	for _, a := range allocs {
		owner := a.GetOwner()
		c.held.Store(owner, c.holdFor(nil, strings.TrimPrefix(a.GetPool(), "pools/")))
		if _, exists, _ := c.services.GetIndexer().GetByKey(owner); !exists {
			orphans++
			c.queue.Add(owner)
		}
	}
	c.logger.InfoContext(ctx, "resync", "allocations", len(allocs), "without_service", orphans)
	return nil
}

// retry calls f until it succeeds or ctx is done, backing off up to 5 s.
func retry(ctx context.Context, logger *slog.Logger, what string, f func() error) error {
	delay := 100 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		logger.WarnContext(ctx, what+" failed; retrying", "error", err, "in", delay.String())
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, errors.Join(ctx.Err(), err))
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	turn := c.gate.begin(key)
	err := c.syncService(ctx, key)
	c.gate.end(turn)
	c.reconciles.Add(1)
	if err == nil {
		c.queue.Forget(key)
		return true
	}
	c.failures.Add(1)
	if ctx.Err() != nil {
		return true
	}
	level := slog.LevelWarn
	if apierrors.IsConflict(err) {
		level = slog.LevelDebug // another writer came first; the cache will catch up
	}
	c.logger.Log(ctx, level, "reconcile failed; will retry", "service", key, "error", err, "attempt", c.queue.NumRequeues(key)+1)
	c.queue.AddRateLimited(key)
	return true
}

// Stats are counters of the controller's work.
type Stats struct {
	// Reconciles is the number of reconcile passes; Failures of those that
	// failed.
	Reconciles, Failures uint64
	// Queued is the number of Services waiting to be reconciled.
	Queued int
	// Leading is whether this replica reconciles.
	Leading bool
}

// Stats returns the current counters.
func (c *Controller) Stats() Stats {
	return Stats{Reconciles: c.reconciles.Load(), Failures: c.failures.Load(), Queued: c.queue.Len(), Leading: c.leading.Load()}
}

// Ready reports whether the caches have synced (a standby replica is ready:
// it takes over within seconds).
func (c *Controller) Ready(context.Context) error {
	if !c.synced.Load() {
		return errors.New("informer caches not synced")
	}
	return nil
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		c.logger.Warn("cannot queue object", "error", err)
		return
	}
	c.queue.Add(key)
}

func (c *Controller) namespaceChanged(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.Namespace)
	n, ok2 := newObj.(*corev1.Namespace)
	if !ok1 || !ok2 || mapsEqual(o.Labels, n.Labels) {
		return
	}
	objs, err := c.services.GetIndexer().ByIndex(cache.NamespaceIndex, n.Name)
	if err != nil {
		return
	}
	for _, obj := range objs {
		c.enqueue(obj)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

const sliceIndex = "service"

// sliceServiceKey indexes an EndpointSlice by its Service's key.
func sliceServiceKey(obj any) ([]string, error) {
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	name := es.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return nil, nil
	}
	return []string{es.Namespace + "/" + name}, nil
}

func (c *Controller) sliceChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	keys, _ := sliceServiceKey(obj)
	for _, k := range keys {
		c.queue.Add(k)
	}
}

// stripManagedFields drops managedFields from cached objects: the adapter
// never reads them, and with thousands of Services they are most of the
// cache.
func stripManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// identity returns a leader-election identity: the host name and a random
// suffix, so that two replicas on one host differ.
func identity() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s_%x", host, b)
}
