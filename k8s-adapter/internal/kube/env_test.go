package kube_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
	"github.com/beaconlb/beacon/k8s-adapter/internal/request"
	"github.com/beaconlb/beacon/k8s-adapter/internal/testenv"
	"github.com/beaconlb/beacon/pkg/ipamtest"
	"github.com/beaconlb/beacon/pkg/testwait"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// The API server and the IPAM are shared by every test of the package; each
// test has its own tenant, namespace, load balancer class and pools, so
// tests do not see each other's Services or addresses.
var (
	cluster *testenv.Cluster
	ipamd   *ipamtest.Replica
	k8s     kubernetes.Interface
	ipam    kube.IPAM
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	cluster, err = testenv.StartCluster(ctx)
	if errors.Is(err, testenv.ErrNoTestbins) && os.Getenv("BEACON_TESTBINS_REQUIRED") == "" {
		fmt.Println("SKIP: the adapter's tests need a real API server:", err)
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "start kube-apiserver:", err)
		return 1
	}
	defer cluster.Stop()
	defer ipamtest.Cleanup()
	var stopIPAM func()
	ipamd, stopIPAM, err = ipamtest.Serve(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start ipamd:", err)
		return 1
	}
	defer stopIPAM()
	rc, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rc.QPS, rc.Burst = 500, 1000
	k8s = kubernetes.NewForConfigOrDie(rc)
	cc, err := grpc.NewClient(ipamd.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cc.Close()
	ipam = kube.IPAM{
		Allocations:   ipamv1.NewAllocationServiceClient(cc),
		Pools:         ipamv1.NewPoolServiceClient(cc),
		Announcements: ipamv1.NewAnnouncementServiceClient(cc),
	}
	code := m.Run()
	if code != 0 {
		fmt.Println(cluster.Logs())
		fmt.Println("--- ipamd\n" + ipamd.Tail(6000))
	}
	return code
}

var serial atomic.Int32

// env is one test's slice of the cluster.
type env struct {
	t      *testing.T
	n      int
	tenant string
	ns     string
	class  string
}

// newEnv makes a tenant, a namespace (with labels) and a class for t.
func newEnv(t *testing.T, nsLabels map[string]string) *env {
	t.Helper()
	n := int(serial.Add(1))
	e := &env{t: t, n: n, tenant: fmt.Sprintf("t%d", n), ns: fmt.Sprintf("ns%d", n), class: fmt.Sprintf("beacon.io/test-%d", n)}
	_, err := k8s.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns, Labels: nsLabels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last, after the test's adapters stopped:
	// free the Services' ClusterIPs (the IPv4 range is a /26) for later
	// tests. Without kube-controller-manager the namespace itself would
	// stay Terminating, so it stays.
	t.Cleanup(func() { e.deleteServices() })
	return e
}

func (e *env) deleteServices() {
	ctx := context.Background()
	list, err := k8s.CoreV1().Services(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) > 200 {
		return // a benchmark's thousands of Services go with the API server
	}
	for _, s := range list.Items {
		if len(s.Finalizers) > 0 {
			_, _ = k8s.CoreV1().Services(e.ns).Patch(ctx, s.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
		_ = k8s.CoreV1().Services(e.ns).Delete(ctx, s.Name, metav1.DeleteOptions{})
	}
}

// v4 and v6 return ranges of the test's own, in documentation ranges: a
// /28 of 192.0.2.0/24 or 198.51.100.0/24 (two per test, reused round-robin
// by later tests: tests run one at a time and delete their pools when they
// end; 203.0.113.0/24 is left to the MetalLB manifests), and
// 2001:db8:N:I::/120.
func (e *env) v4(i int) string {
	block := (2*(e.n-1) + i) % 32
	nets := [2]string{"192.0.2", "198.51.100"}
	return fmt.Sprintf("%s.%d/28", nets[block/16], (block%16)*16)
}

func (e *env) v6(i int) string { return fmt.Sprintf("2001:db8:%x:%x::/120", e.n, i) }

// pool creates an IPAM pool for the test's tenant.
func (e *env) pool(id string, p *ipamv1.Pool) string {
	e.t.Helper()
	id = fmt.Sprintf("%s-%s", e.tenant, id)
	p.Tenants = []string{e.tenant}
	_, err := ipam.Pools.CreatePool(context.Background(), &ipamv1.CreatePoolRequest{PoolId: id, Pool: p})
	if err != nil {
		e.t.Fatalf("create pool %s: %v", id, err)
	}
	e.t.Cleanup(func() {
		_, _ = ipam.Pools.DeletePool(context.Background(), &ipamv1.DeletePoolRequest{Name: "pools/" + id, Force: true})
	})
	return id
}

// adapter runs a controller for the test until the returned stop is called
// or the test ends.
type adapter struct {
	c    *kube.Controller
	stop func()
}

func (e *env) start(mod func(*kube.Config)) *adapter {
	e.t.Helper()
	cfg := kube.Config{
		Tenant: e.tenant,
		Filter: request.Filter{Class: e.class},
	}
	if mod != nil {
		mod(&cfg)
	}
	return startAdapter(e.t, cfg)
}

// apiLimits are the adapter's client-side limits: the command's defaults.
var apiLimits = kube.ConnectOptions{QPS: 300, Burst: 600}

func startAdapter(t *testing.T, cfg kube.Config) *adapter {
	t.Helper()
	co := apiLimits
	co.Kubeconfig = cluster.Kubeconfig
	kc, err := kube.Connect(co)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.New(kc, ipam, testLogger(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, kube.ErrLostLeadership) {
					t.Errorf("adapter: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("adapter did not stop within 20s")
			}
		})
	}
	t.Cleanup(stop)
	return &adapter{c: c, stop: stop}
}

// testLogger logs to the test's output when -v is set (BEACON_TEST_LOG=1),
// else nowhere.
func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("BEACON_TEST_LOG") == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// svc builds a LoadBalancer Service of the test's class.
func (e *env) svc(name string, mods ...func(*corev1.Service)) *corev1.Service {
	class := e.class
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"app": name}},
		Spec: corev1.ServiceSpec{
			Type:              corev1.ServiceTypeLoadBalancer,
			LoadBalancerClass: &class,
			Ports:             []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func (e *env) create(s *corev1.Service) *corev1.Service {
	e.t.Helper()
	out, err := k8s.CoreV1().Services(e.ns).Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create service %s: %v", s.Name, err)
	}
	return out
}

func (e *env) get(name string) (*corev1.Service, error) {
	return k8s.CoreV1().Services(e.ns).Get(context.Background(), name, metav1.GetOptions{})
}

// update applies mod to the current Service, retrying on conflicts.
func (e *env) update(name string, mod func(*corev1.Service)) {
	e.t.Helper()
	var err error
	for range 50 {
		var s *corev1.Service
		if s, err = e.get(name); err != nil {
			e.t.Fatal(err)
		}
		mod(s)
		if _, err = k8s.CoreV1().Services(e.ns).Update(context.Background(), s, metav1.UpdateOptions{}); err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			break
		}
	}
	e.t.Fatalf("update %s: %v", name, err)
}

// waitFor polls cond for up to a minute; cond returns whether it holds
// and, if not, what it saw.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	last := ""
	if err := testwait.Poll(t.Context(), time.Minute, func() error {
		ok, seen := cond()
		if ok {
			return nil
		}
		last = seen
		return testwait.ErrNotYet
	}); err != nil {
		t.Fatalf("timed out waiting for %s; last saw: %s", what, last)
	}
}

// never watches the tenant's allocations for d (from the current
// revision) and fails the test if an event for owner's allocation shows
// bad: proof that something did not happen, from the IPAM's own stream.
func (e *env) never(owner string, d time.Duration, what string, bad func(*ipamv1.Allocation) bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), d)
	defer cancel()
	stream, err := ipam.Allocations.WatchAllocations(ctx, &ipamv1.WatchAllocationsRequest{Parent: "tenants/" + e.tenant})
	if err != nil {
		e.t.Fatal(err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			if ctx.Err() == nil {
				e.t.Fatalf("watch ended before %v: %v", d, err)
			}
			return // d passed and it did not happen
		}
		for _, ev := range resp.GetEvents() {
			if a := ev.GetAllocation(); a.GetOwner() == owner && bad(a) {
				e.t.Fatalf("%s: %v", what, a)
			}
		}
	}
}

// ingress returns the Service's status IPs.
func ingress(s *corev1.Service) []string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// waitIPs waits until the Service's status lists n IPs and returns them.
func (e *env) waitIPs(name string, n int) []string {
	e.t.Helper()
	var ips []string
	waitFor(e.t, name+" to get addresses", func() (bool, string) {
		s, err := e.get(name)
		if err != nil {
			return false, err.Error()
		}
		ips = ingress(s)
		return len(ips) == n, fmt.Sprintf("%v", ips)
	})
	return ips
}

// allocation returns the test tenant's allocation of owner, or nil.
func (e *env) allocation(owner string) *ipamv1.Allocation {
	e.t.Helper()
	resp, err := ipam.Allocations.ListAllocations(context.Background(), &ipamv1.ListAllocationsRequest{
		Parent: "tenants/" + e.tenant, Filter: fmt.Sprintf("owner = %q", owner),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(resp.GetAllocations()) == 0 {
		return nil
	}
	return resp.GetAllocations()[0]
}

// waitEvent waits for an Event of reason on the Service and returns its
// message.
func (e *env) waitEvent(name, reason string) string {
	e.t.Helper()
	var msg string
	waitFor(e.t, fmt.Sprintf("event %s on %s", reason, name), func() (bool, string) {
		evs, err := k8s.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ev := range evs.Items {
			if ev.Reason == reason {
				msg = ev.Message
				return true, ""
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
		}
		return false, strings.Join(seen, "; ")
	})
	return msg
}
