package ipamtest

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestMain(m *testing.M) { Main(m) }

// serving asks cc's health service until it answers SERVING.
func serving(t *testing.T, cc *grpc.ClientConn) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health %v, want SERVING", resp.GetStatus())
	}
	return nil
}

func TestReplicasShareOneEtcd(t *testing.T) {
	ipam := Start(t, Options{Replicas: 2})
	if len(ipam.Replicas) != 2 {
		t.Fatalf("%d replicas, want 2", len(ipam.Replicas))
	}
	if ipam.EtcdEndpoints() == "" {
		t.Fatal("the first replica logged no embedded etcd endpoints")
	}
	for _, r := range ipam.Replicas {
		if err := serving(t, r.Conn(t)); err != nil {
			t.Errorf("replica %s: %v", r.Addr, err)
		}
	}
	if err := serving(t, ipam.Conn("")); err != nil {
		t.Errorf("round robin: %v", err)
	}
	if err := ipam.Replicas[1].Stop(StopTimeout); err != nil {
		t.Errorf("stop: %v", err)
	}
	if !ipam.Replicas[1].Exited() {
		t.Error("stopped replica still running")
	}
}

func TestMutualTLS(t *testing.T) {
	ipam := Start(t, Options{TLS: MutualTLS})
	if err := serving(t, ipam.Conn(Admin)); err != nil {
		t.Fatalf("admin over mutual TLS: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	plain := Dial(t, ipam.Addrs(), insecure.NewCredentials())
	if _, err := healthpb.NewHealthClient(plain).Check(ctx, &healthpb.HealthCheckRequest{}); err == nil {
		t.Error("a plaintext client reached a TLS replica")
	}
}

func TestShared(t *testing.T) {
	a, b := Shared(t), Shared(t)
	if a != b {
		t.Fatal("Shared started two replicas")
	}
	if err := serving(t, a.Conn(t)); err != nil {
		t.Fatal(err)
	}
}

// TestReplicasOnRealEtcd runs two replicas on the test binaries' etcd:
// what one writes, the other reads.
func TestReplicasOnRealEtcd(t *testing.T) {
	ipam := Start(t, Options{Replicas: 2, EtcdEndpoints: StartEtcd(t)})
	for _, r := range ipam.Replicas {
		if err := serving(t, r.Conn(t)); err != nil {
			t.Errorf("replica %s: %v", r.Addr, err)
		}
	}
	if got := ipam.Replicas[0].EtcdEndpoints(); got != "" {
		t.Errorf("a replica on a real etcd says it runs an embedded one at %s", got)
	}
}
