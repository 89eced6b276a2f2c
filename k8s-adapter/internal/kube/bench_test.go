package kube_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
	"github.com/beaconlb/beacon/pkg/testwait"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// The benchmarks run only with BEACON_K8S_BENCH=1 (make bench-k8s): they
// create 11,000 Services and take minutes. They print BENCH lines.
//
// The API server's IPv4 ClusterIP range is a /26 (a documentation range),
// so the benchmark's Services are IPv6 single-stack: their ClusterIPs come
// from the /112 beside it and their load balancer addresses from an IPv6
// pool.

func benchEnabled(t *testing.T) {
	if os.Getenv("BEACON_K8S_BENCH") == "" {
		t.Skip("set BEACON_K8S_BENCH=1 to run the benchmarks")
	}
}

// benchConfig is the adapter as deployed: the command's defaults (and its
// API request limits, apiLimits).
func benchConfig(c *kube.Config) {
	c.Workers = 16
}

func v6Service(ns, name, class string) *corev1.Service {
	single := corev1.IPFamilyPolicySingleStack
	noNodePorts := false // the API server's NodePort range has 2,768 ports
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class,
			IPFamilyPolicy: &single, IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol},
			AllocateLoadBalancerNodePorts: &noNodePorts,
			Ports:                         []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
}

// watchAddressed records when each Service of ns is first seen, and when it
// first has an address. It uses an informer: a plain watch may be closed by
// the API server under load.
type watchAddressed struct {
	mu    sync.Mutex
	added map[string]time.Time
	seen  map[string]time.Time
}

func startWatch(t *testing.T, ns string) *watchAddressed {
	t.Helper()
	wa := &watchAddressed{added: map[string]time.Time{}, seen: map[string]time.Time{}}
	record := func(obj any) {
		s, ok := obj.(*corev1.Service)
		if !ok {
			return
		}
		now := time.Now()
		wa.mu.Lock()
		defer wa.mu.Unlock()
		if _, ok := wa.added[s.Name]; !ok {
			wa.added[s.Name] = now
		}
		if _, ok := wa.seen[s.Name]; !ok && len(s.Status.LoadBalancer.Ingress) > 0 {
			wa.seen[s.Name] = now
		}
	}
	f := informers.NewSharedInformerFactoryWithOptions(k8s, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Services().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	f.Start(stop)
	t.Cleanup(func() { close(stop); f.Shutdown() })
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return wa
}

func (wa *watchAddressed) count() int {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	return len(wa.seen)
}

// at returns when the Service was first seen and when it had an address.
func (wa *watchAddressed) at(name string) (added, addressed time.Time) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	return wa.added[name], wa.seen[name]
}

// createMany creates n Services named prefix-i with workers goroutines, at
// most rate a second (0: as fast as they go), and returns when each create
// call started.
func createMany(t *testing.T, ns, class, prefix string, n, workers int, rate float64) map[string]time.Time {
	t.Helper()
	started := make(map[string]time.Time, n)
	var mu sync.Mutex
	next := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for i := range next {
				name := prefix + "-" + strconv.Itoa(i)
				mu.Lock()
				started[name] = time.Now()
				mu.Unlock()
				if _, err := k8s.CoreV1().Services(ns).Create(context.Background(), v6Service(ns, name, class), metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	begin := time.Now()
	for i := range n {
		if rate > 0 {
			time.Sleep(time.Until(begin.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		}
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	return started
}

func waitCount(t *testing.T, what string, d time.Duration, f func() int, want int) {
	t.Helper()
	if err := testwait.Poll(t.Context(), d, func() error {
		if n := f(); n < want {
			return fmt.Errorf("%d of %d", n, want)
		}
		return nil
	}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// TestBenchStatusLatency creates 1,000 Services at a steady 50 a second,
// 1,000 at 100 a second, then 1,000 as fast as four clients can, and
// measures how long each waits for its address.
func TestBenchStatusLatency(t *testing.T) {
	benchEnabled(t)
	const n = 1000
	e := newEnv(t, nil)
	e.pool("bench", &ipamv1.Pool{Ranges: []string{"2001:db8:beac:1::/116"}})
	e.start(benchConfig)
	wa := startWatch(t, e.ns)
	// Warm up (connections, the API server's caches for a new namespace):
	// the first dozens of Services of a fresh API server are slower.
	createMany(t, e.ns, e.class, "warm", 50, 1, 50)
	want := 50
	waitCount(t, "warm-up Services with an address", time.Minute, wa.count, want)
	for _, phase := range []struct {
		name    string
		clients int
		rate    float64
	}{
		{"", 1, 50},
		{"_100ps", 2, 100},
		{"_burst", 4, 0},
	} {
		start := time.Now()
		started := createMany(t, e.ns, e.class, "p"+strings.ReplaceAll(phase.name, "_", "-"), n, phase.clients, phase.rate)
		created := time.Since(start)
		want += n
		waitCount(t, "Services with an address", 2*time.Minute, wa.count, want)
		// Two latencies: from the create call (includes the API server's
		// own create), and from the Service's first watch event (the
		// adapter's part: watch, queue, IPAM, status write, watch).
		fromCall := make([]time.Duration, 0, n)
		fromEvent := make([]time.Duration, 0, n)
		for name, t0 := range started {
			added, addressed := wa.at(name)
			fromCall = append(fromCall, addressed.Sub(t0))
			fromEvent = append(fromEvent, addressed.Sub(added))
		}
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		t.Logf("%d Services created by %d clients (rate limit %.0f/s) in %v: %.0f/s", n, phase.clients, phase.rate, created.Round(time.Millisecond), float64(n)/created.Seconds())
		t.Logf("  create call → address: p50 %v p90 %v p99 %v max %v", percentile(fromCall, 0.5), percentile(fromCall, 0.9), percentile(fromCall, 0.99), percentile(fromCall, 1))
		t.Logf("  first event → address: p50 %v p90 %v p99 %v max %v", percentile(fromEvent, 0.5), percentile(fromEvent, 0.9), percentile(fromEvent, 0.99), percentile(fromEvent, 1))
		fmt.Printf("BENCH k8s_status_p50%s %.1f ms\n", phase.name, ms(percentile(fromEvent, 0.5)))
		fmt.Printf("BENCH k8s_status_p99%s %.1f ms\n", phase.name, ms(percentile(fromEvent, 0.99)))
		fmt.Printf("BENCH k8s_status_from_create_p99%s %.1f ms\n", phase.name, ms(percentile(fromCall, 0.99)))
		fmt.Printf("BENCH k8s_create_rate%s %.0f services/s\n", phase.name, float64(n)/created.Seconds())
	}
}

func TestBenchResync(t *testing.T) {
	benchEnabled(t)
	const n = 10000
	e := newEnv(t, nil)
	e.pool("bench", &ipamv1.Pool{Ranges: []string{"2001:db8:beac:2::/112"}})
	a := e.start(benchConfig)
	wa := startWatch(t, e.ns)
	start := time.Now()
	createMany(t, e.ns, e.class, "r", n, 16, 0)
	created := time.Since(start)
	waitCount(t, "Services with an address", 10*time.Minute, wa.count, n)
	all := time.Since(start)
	t.Logf("%d Services created in %v; all addressed after %v (%.0f/s)", n, created.Round(time.Millisecond), all.Round(time.Millisecond), float64(n)/all.Seconds())
	fmt.Printf("BENCH k8s_create_10000 %.1f s\n", all.Seconds())
	// Let the last finalizer and annotation writes land.
	waitCount(t, "an idle queue", time.Minute, func() int {
		if a.c.Stats().Queued == 0 {
			return 1
		}
		return 0
	}, 1)
	// The finalizer and the annotations go in one patch (the address came
	// before): the finalizer on every Service says they all landed.
	waitCount(t, "Services with the finalizer", 5*time.Minute, func() int {
		list, err := k8s.CoreV1().Services(e.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return 0
		}
		done := 0
		for _, s := range list.Items {
			if slices.Contains(s.Finalizers, kube.Finalizer) {
				done++
			}
		}
		return done
	}, n)
	before := addresses(t, e)
	a.stop()

	// Restart: time until every Service has been reconciled once.
	b := e.start(benchConfig)
	start = time.Now()
	total := 0
	waitCount(t, "the restarted adapter's caches", time.Minute, func() int {
		if b.c.Ready(context.Background()) == nil {
			return 1
		}
		return 0
	}, 1)
	list, err := k8s.CoreV1().Services("").List(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	total = len(list.Items)
	waitCount(t, "every Service reconciled", 2*time.Minute, func() int {
		s := b.c.Stats()
		if s.Queued > 0 {
			return 0
		}
		return int(s.Reconciles)
	}, total)
	took := time.Since(start)
	st := b.c.Stats()
	t.Logf("restart: %d Services (%d of the benchmark) reconciled in %v; reconciles %d, failures %d", total, n, took.Round(time.Millisecond), st.Reconciles, st.Failures)
	fmt.Printf("BENCH k8s_resync_10000 %.2f s\n", took.Seconds())

	after := addresses(t, e)
	changes := 0
	for name, addrs := range before {
		if !slices.Equal(addrs, after[name]) {
			changes++
		}
	}
	changes += max(0, len(after)-len(before))
	fmt.Printf("BENCH k8s_resync_address_changes %d count\n", changes)
	if changes != 0 {
		t.Errorf("%d Services changed address over the restart", changes)
	}
}

// addresses returns every benchmark Service's status addresses, and fails
// if one disagrees with its IPAM allocation.
func addresses(t *testing.T, e *env) map[string][]string {
	t.Helper()
	list, err := k8s.CoreV1().Services(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string][]string, len(list.Items))
	for _, s := range list.Items {
		out[s.Name] = ingress(&s)
	}
	allocs := map[string][]string{}
	token := ""
	for {
		r, err := ipam.Allocations.ListAllocations(context.Background(), &ipamv1.ListAllocationsRequest{Parent: "tenants/" + e.tenant, PageSize: 1000, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range r.GetAllocations() {
			allocs[a.GetOwner()] = a.GetAddresses()
		}
		if token = r.GetNextPageToken(); token == "" {
			break
		}
	}
	bad := 0
	for name, addrs := range out {
		if !slices.Equal(addrs, allocs[e.ns+"/"+name]) {
			bad++
		}
	}
	if bad > 0 || len(allocs) != len(out) {
		t.Errorf("%d Services disagree with the IPAM; %d allocations for %d Services", bad, len(allocs), len(out))
	}
	return out
}
