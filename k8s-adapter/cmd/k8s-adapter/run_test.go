package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/beaconlb/beacon/k8s-adapter/internal/testenv"
	"github.com/beaconlb/beacon/pkg/ipamtest"
	"github.com/beaconlb/beacon/pkg/testwait"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func TestMain(m *testing.M) { ipamtest.Main(m) }

// TestRun runs the whole program against a real API server and ipamd: a
// Service gets its address, /readyz answers, and cancelling (SIGTERM) stops
// it cleanly and gives the Lease up.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster, err := testenv.StartCluster(ctx)
	if errors.Is(err, testenv.ErrNoTestbins) && os.Getenv("BEACON_TESTBINS_REQUIRED") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	ipamd := ipamtest.Start(t, ipamtest.Options{Args: []string{"--release-hold", "10m"}}).Replicas[0]
	cc, err := grpc.NewClient(ipamd.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := ipamv1.NewPoolServiceClient(cc).CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: "web", Pool: &ipamv1.Pool{Ranges: []string{"192.0.2.0/28"}}}); err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	k8s := kubernetes.NewForConfigOrDie(rc)
	if _, err := k8s.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "beacon-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cfg, err := parseConfig([]string{"--tenant", "c1", "--ipam", ipamd.Addr, "--kubeconfig", cluster.Kubeconfig, "--ops-listen", "127.0.0.1:0"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	// The ops address is picked at random; find it in the log.
	logR, logW := io.Pipe()
	logger := slog.New(slog.NewJSONHandler(logW, nil))
	ops := make(chan string, 1)
	go scanLog(logR, ops)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx, cfg, logger) }()

	_, err = k8s.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, time.Minute, "the Service's address", func() error {
		s, err := k8s.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.Status.LoadBalancer.Ingress) != 1 {
			return fmt.Errorf("ingress %v", s.Status.LoadBalancer.Ingress)
		}
		return nil
	})
	s, err := k8s.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip := s.Status.LoadBalancer.Ingress[0].IP; ip != "192.0.2.0" {
		t.Errorf("address %s, want the pool's lowest, 192.0.2.0", ip)
	}
	select {
	case addr := <-ops:
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("/readyz: %v %v", resp, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
	case <-time.After(10 * time.Second):
		t.Error("no ops address logged")
	}

	start := time.Now()
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run returned %v on a clean stop", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return within 15s of its context ending")
	}
	t.Logf("stopped in %v", time.Since(start))
	lease, err := k8s.CoordinationV1().Leases("beacon-system").Get(ctx, "beacon-k8s-adapter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the Lease is still held by %q after a clean stop", *h)
	}
	_ = logW.Close()
}

// scanLog sends the ops address from the "k8s-adapter running" line.
func scanLog(r io.Reader, ops chan<- string) {
	dec := jsonLines(r)
	for rec := range dec {
		if rec["msg"] == "k8s-adapter running" {
			if a, ok := rec["ops"].(string); ok {
				ops <- a
			}
		}
	}
}
