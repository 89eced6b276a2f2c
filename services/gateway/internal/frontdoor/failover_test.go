package frontdoor_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/beaconlb/beacon/pkg/ipamtest"
	"github.com/beaconlb/beacon/pkg/telemetry"
	"github.com/beaconlb/beacon/pkg/testwait"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/gateway/internal/testenv"
)

// resumes reads the gateway's beacon_gateway_stream_resumes counter.
func resumes(t *testing.T, tel *telemetry.Telemetry) int {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	m := regexp.MustCompile(`(?m)^beacon_gateway_stream_resumes_total\{[^}]*\} (\d+)$`).FindStringSubmatch(rec.Body.String())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestWatchSurvivesReplicaKill runs two IPAM replicas on one etcd (a third
// ipamd holds the embedded etcd and is not behind the gateway), opens a
// WatchAllocations through the gateway, and kills the replica serving it.
// The caller's stream must go on, resumed on the other replica from its
// resume_token, without losing or breaking off: every allocation made
// before, during and after the kill arrives as an event.
func TestWatchSurvivesReplicaKill(t *testing.T) {
	ipam := ipamtest.Start(t, ipamtest.Options{Replicas: 3}) // the first holds the embedded etcd
	b, c := ipam.Replicas[1], ipam.Replicas[2]
	tel, err := telemetry.New(t.Context(), telemetry.Config{ServiceName: "gateway-test"})
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Options{IPAM: []string{b.Addr, c.Addr}, Telemetry: tel})
	env.WaitReady(t)
	const tenant = "failover"
	admin := env.Conn(t, env.Admin())
	createPool(t, env, "failover-pool", "2001:db8:a205::/118", tenant)
	tenantConn := env.Conn(t, testenv.Cert("beacon://tenant/"+tenant))
	for i := range 3 {
		allocate(t, tenantConn, tenant, fmt.Sprintf("ns/before-%d", i), "failover-pool")
	}

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ws, err := ipamv1.NewAllocationServiceClient(tenantConn).WatchAllocations(ctx, &ipamv1.WatchAllocationsRequest{Parent: "tenants/" + tenant})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	events := make(chan string, 1000)
	streamErr := make(chan error, 1)
	go func() {
		for {
			msg, err := ws.Recv()
			if err != nil {
				streamErr <- err
				return
			}
			for _, ev := range msg.GetEvents() {
				events <- ev.GetAllocation().GetOwner()
			}
		}
	}()
	waitFor := func(owners ...string) {
		t.Helper()
		for _, o := range owners {
			for !seen[o] {
				select {
				case got := <-events:
					seen[got] = true
				case err := <-streamErr:
					t.Fatalf("the caller's watch broke waiting for %s: %v", o, err)
				case <-ctx.Done():
					t.Fatalf("no event for %s", o)
				}
			}
		}
	}
	waitFor("ns/before-0", "ns/before-1", "ns/before-2")

	// allocateSome makes allocations (through the gateway, so on whichever
	// replica is up) and waits for their events on the watch.
	round := 0
	allocateSome := func() {
		t.Helper()
		round++
		var owners []string
		for i := range 3 {
			o := fmt.Sprintf("ns/round-%d-%d", round, i)
			// With a request_id, as a client that rides out a replica's
			// death sends it: the gateway may then retry the call that met
			// the dead replica's connection on another one.
			if _, err := ipamv1.NewAllocationServiceClient(tenantConn).Allocate(t.Context(), &ipamv1.AllocateRequest{
				Parent:     "tenants/" + tenant,
				Allocation: &ipamv1.Allocation{Owner: o, RequestedPool: "pools/failover-pool"},
				RequestId:  fmt.Sprintf("failover-%d-%d", round, i),
			}); err != nil {
				t.Fatalf("Allocate %s: %v", o, err)
			}
			owners = append(owners, o)
		}
		waitFor(owners...)
	}
	allocateSome()

	// Kill B. If the stream was on C, nothing happens to it; then bring a
	// replica back at B's address and kill C, so that the replica serving
	// the stream dies either way.
	victims := []*ipamtest.Replica{b, c}
	for i, v := range victims {
		t.Logf("killing replica %s", v.Addr)
		v.Kill()
		allocateSome()
		if resumes(t, tel) > 0 {
			break
		}
		if i == 0 {
			b2 := ipam.StartReplica("--etcd-endpoints", ipam.EtcdEndpoints(), "--listen", b.Addr)
			t.Logf("replica back at %s; the stream was not on the killed one", b2.Addr)
			waitServing(t, admin, b2)
		}
	}
	if n := resumes(t, tel); n != 1 {
		t.Fatalf("stream resumes = %d, want 1", n)
	}
	allocateSome()
	select {
	case err := <-streamErr:
		t.Fatalf("the caller's watch ended: %v", err)
	default:
	}
}

// waitServing waits until the gateway has sent calls to p, so that p is in
// the gateway's rotation.
func waitServing(t *testing.T, admin *grpc.ClientConn, p *ipamtest.Replica) {
	t.Helper()
	testwait.Until(t, time.Minute, "the gateway to send calls to "+p.Addr, func() bool {
		for range 4 {
			_, _ = ipamv1.NewPoolServiceClient(admin).ListPools(t.Context(), &ipamv1.ListPoolsRequest{})
		}
		return served(t, p) > 0
	})
}

// served counts the ListPools calls p has answered, from its metrics.
func served(t *testing.T, p *ipamtest.Replica) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+p.Ops+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^rpc_server_call_duration_seconds_count\{[^}]*rpc_method="beacon\.ipam\.v1\.PoolService/ListPools"[^}]*\} (\d+)`)
	n := 0
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}
