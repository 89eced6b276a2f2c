package frontdoor_test

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/beaconlb/beacon/pkg/ipamtest"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/gateway/internal/testenv"
)

// TestTenantIsolation has tenant A try every way of reading, changing or
// learning of tenant B's allocations, over gRPC and over REST, and checks
// that each is refused, that A's own views show only A, and that B's
// allocation is untouched afterwards.
func TestTenantIsolation(t *testing.T) {
	ipam := ipamtest.Shared(t)
	env := testenv.Start(t, testenv.Options{IPAM: []string{ipam.Addr}})
	const ta, tb = "iso-a", "iso-b"
	createPool(t, env, "iso-shared", "2001:db8:a201::/120", ta, tb)
	createPool(t, env, "iso-b-only", "2001:db8:a201:1::/120", tb)

	a := env.Conn(t, testenv.Cert("beacon://tenant/"+ta))
	b := env.Conn(t, testenv.Token(env.IssueToken(t, "iso-b-adapter", ipamv1.Role_ROLE_TENANT, tb)))
	aAlloc := allocate(t, a, ta, "ns/a", "iso-shared")
	bAlloc := allocate(t, b, tb, "ns/b", "iso-b-only")

	alloc := ipamv1.NewAllocationServiceClient(a)
	ctx := t.Context()
	t.Run("gRPC refusals", func(t *testing.T) {
		refused := map[string]error{}
		_, refused["GetAllocation of B"] = alloc.GetAllocation(ctx, &ipamv1.GetAllocationRequest{Name: bAlloc.GetName()})
		_, refused["ListAllocations of B"] = alloc.ListAllocations(ctx, &ipamv1.ListAllocationsRequest{Parent: "tenants/" + tb})
		_, refused["ListAllocations of every tenant"] = alloc.ListAllocations(ctx, &ipamv1.ListAllocationsRequest{Parent: "tenants/-"})
		_, refused["Release B by name"] = alloc.Release(ctx, &ipamv1.ReleaseRequest{Name: bAlloc.GetName()})
		_, refused["Release B by owner"] = alloc.Release(ctx, &ipamv1.ReleaseRequest{Parent: "tenants/" + tb, Owner: "ns/b"})
		_, refused["RenewAllocation of B"] = alloc.RenewAllocation(ctx, &ipamv1.RenewAllocationRequest{Name: bAlloc.GetName()})
		_, refused["UpdateAllocation of B"] = alloc.UpdateAllocation(ctx, &ipamv1.UpdateAllocationRequest{
			Allocation: &ipamv1.Allocation{Name: bAlloc.GetName(), OwnerLabels: map[string]string{"x": "y"}},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"owner_labels"}},
		})
		_, refused["Allocate for B"] = alloc.Allocate(ctx, &ipamv1.AllocateRequest{Parent: "tenants/" + tb, Allocation: &ipamv1.Allocation{Owner: "ns/evil"}})
		_, refused["ListAuditRecords of B"] = ipamv1.NewAuditServiceClient(a).ListAuditRecords(ctx, &ipamv1.ListAuditRecordsRequest{Parent: "tenants/" + tb})
		_, refused["ListAuditRecords of every tenant"] = ipamv1.NewAuditServiceClient(a).ListAuditRecords(ctx, &ipamv1.ListAuditRecordsRequest{Parent: "tenants/-"})
		_, refused["GetTenant B"] = ipamv1.NewTenantServiceClient(a).GetTenant(ctx, &ipamv1.GetTenantRequest{Name: "tenants/" + tb})
		_, refused["ListAnnouncers of B"] = ipamv1.NewAnnouncerServiceClient(a).ListAnnouncers(ctx, &ipamv1.ListAnnouncersRequest{Parent: "tenants/" + tb})
		_, refused["GetPool only B may use"] = ipamv1.NewPoolServiceClient(a).GetPool(ctx, &ipamv1.GetPoolRequest{Name: "pools/iso-b-only"})
		_, refused["GetPool that does not exist"] = ipamv1.NewPoolServiceClient(a).GetPool(ctx, &ipamv1.GetPoolRequest{Name: "pools/iso-nope"})
		for _, parent := range []string{"tenants/" + tb, "tenants/-"} {
			ws, err := alloc.WatchAllocations(ctx, &ipamv1.WatchAllocationsRequest{Parent: parent})
			if err == nil {
				_, err = ws.Recv()
			}
			refused["WatchAllocations of "+parent] = err
		}
		for what, err := range refused {
			wantCode(t, what, err, codes.PermissionDenied)
		}
	})

	t.Run("gRPC own views", func(t *testing.T) {
		list, err := alloc.ListAllocations(ctx, &ipamv1.ListAllocationsRequest{Parent: "tenants/" + ta})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]*ipamv1.Allocation{aAlloc}, list.GetAllocations(), protocmp.Transform(), protocmp.IgnoreFields(&ipamv1.Allocation{}, "announcements")); diff != "" {
			t.Errorf("A's list (-want +got):\n%s", diff)
		}
		ws, err := alloc.WatchAllocations(ctx, &ipamv1.WatchAllocationsRequest{Parent: "tenants/" + ta})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for {
			msg, err := ws.Recv()
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range msg.GetEvents() {
				names = append(names, ev.GetAllocation().GetName())
			}
			if msg.GetSnapshotComplete() {
				break
			}
		}
		if diff := cmp.Diff([]string{aAlloc.GetName()}, names); diff != "" {
			t.Errorf("A's watch snapshot (-want +got):\n%s", diff)
		}
		audit, err := ipamv1.NewAuditServiceClient(a).ListAuditRecords(ctx, &ipamv1.ListAuditRecordsRequest{Parent: "tenants/" + ta})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range audit.GetAuditRecords() {
			if r.GetAllocation() != aAlloc.GetName() {
				t.Errorf("A's audit shows %s", r.GetAllocation())
			}
		}
		pools, err := ipamv1.NewPoolServiceClient(a).ListPools(ctx, &ipamv1.ListPoolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*ipamv1.Pool{}
		for _, p := range pools.GetPools() {
			byName[p.GetName()] = p
			if len(p.GetTenants()) > 0 && !slices.Equal(p.GetTenants(), []string{ta}) {
				t.Errorf("A sees %s with tenants %v", p.GetName(), p.GetTenants())
			}
		}
		if byName["pools/iso-shared"] == nil || byName["pools/iso-b-only"] != nil {
			t.Errorf("A's pools: %v; want iso-shared and not iso-b-only", slices.Sorted(func(yield func(string) bool) {
				for k := range byName {
					if !yield(k) {
						return
					}
				}
			}))
		}
	})

	t.Run("REST refusals and own views", func(t *testing.T) {
		hc := env.HTTP(t, testenv.Cert("beacon://tenant/"+ta))
		cred := testenv.Cred{}
		for _, tt := range []struct{ method, path, body string }{
			{"GET", "/v1/tenants/" + tb + "/allocations", ""},
			{"GET", "/v1/tenants/-/allocations", ""},
			{"GET", "/v1/" + bAlloc.GetName(), ""},
			{"POST", "/v1/" + bAlloc.GetName() + ":release", "{}"},
			{"POST", "/v1/" + bAlloc.GetName() + ":renew", "{}"},
			{"PATCH", "/v1/" + bAlloc.GetName() + "?update_mask=owner_labels", `{"ownerLabels":{"x":"y"}}`},
			{"POST", "/v1/tenants/" + tb + "/allocations:allocate", `{"allocation":{"owner":"ns/evil"}}`},
			{"GET", "/v1/tenants/" + tb + "/allocations:watch", ""},
			{"GET", "/v1/tenants/" + tb + "/auditRecords", ""},
			{"GET", "/v1/tenants/" + tb, ""},
			{"GET", "/v1/pools/iso-b-only", ""},
		} {
			res := do(t, hc, env.Request(t, cred, tt.method, tt.path, tt.body))
			if strings.HasSuffix(tt.path, ":watch") {
				// Streams report errors as grpc-gateway's {"error": Status}.
				res.Body = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(res.Body), `{"error":`), "}")
			}
			if res.Code != http.StatusForbidden || decodeError(t, res.Body).Code != int(codes.PermissionDenied) {
				t.Errorf("%s %s = %d %s, want 403 PERMISSION_DENIED", tt.method, tt.path, res.Code, res.Body)
			}
		}
		res := do(t, hc, env.Request(t, cred, "GET", "/v1/tenants/"+ta+"/allocations", ""))
		if res.Code != http.StatusOK || !strings.Contains(res.Body, aAlloc.GetName()) || strings.Contains(res.Body, tb) {
			t.Errorf("A's REST list = %d %s", res.Code, res.Body)
		}
		res = do(t, hc, env.Request(t, cred, "GET", "/v1/pools", ""))
		if res.Code != http.StatusOK || !strings.Contains(res.Body, "pools/iso-shared") || strings.Contains(res.Body, "iso-b-only") || strings.Contains(res.Body, tb) {
			t.Errorf("A's REST pools = %d %s", res.Code, res.Body)
		}

		// The REST watch streams A's snapshot, and nothing of B's.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req := env.Request(t, cred, "GET", "/v1/tenants/"+ta+"/allocations:watch", "").WithContext(wctx)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil {
			t.Fatalf("REST watch: %v", err)
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(line, aAlloc.GetName()) || strings.Contains(line, tb) {
			t.Errorf("REST watch first message = %d %s", resp.StatusCode, line)
		}
	})

	t.Run("B untouched", func(t *testing.T) {
		got, err := ipamv1.NewAllocationServiceClient(env.Conn(t, env.Admin())).GetAllocation(ctx, &ipamv1.GetAllocationRequest{Name: bAlloc.GetName()})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetAllocation().GetEtag() != bAlloc.GetEtag() {
			t.Errorf("B's allocation changed: etag %s, was %s", got.GetAllocation().GetEtag(), bAlloc.GetEtag())
		}
	})
}

// TestSubscribeScope checks that an announcer subscribes only for its own
// tenant: a hello naming another tenant is refused before the IPAM hears of
// it, a later message naming one ends the stream, and the plan it gets
// holds its tenant's addresses and none of another's.
func TestSubscribeScope(t *testing.T) {
	ipam := ipamtest.Shared(t)
	env := testenv.Start(t, testenv.Options{IPAM: []string{ipam.Addr}})
	const ta, tb = "sub-a", "sub-b"
	createPool(t, env, "sub-pool", "2001:db8:a202::/120", ta, tb)
	admin := env.Conn(t, env.Admin())
	for _, tn := range []string{ta, tb} {
		_, err := ipamv1.NewAnnouncementServiceClient(admin).CreateL2Advertisement(t.Context(), &ipamv1.CreateL2AdvertisementRequest{
			Parent: "tenants/" + tn, L2AdvertisementId: "all", L2Advertisement: &ipamv1.L2Advertisement{},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	aAlloc := allocate(t, admin, ta, "ns/a", "sub-pool")
	bAlloc := allocate(t, admin, tb, "ns/b", "sub-pool")

	ann := ipamv1.NewAnnouncerServiceClient(env.Conn(t, testenv.Cert("beacon://announcer/"+ta)))
	hello := func(parent string) *ipamv1.SubscribeRequest {
		return &ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Hello{Hello: &ipamv1.SubscribeHello{
			Parent: parent, Node: "node-1", Interfaces: []*ipamv1.NetworkInterface{{Name: "eth0", Up: true, Addresses: []string{"2001:db8:a202::fa/120"}}},
		}}}
	}

	for _, parent := range []string{"tenants/" + tb, "tenants/-", ""} {
		s, err := ann.Subscribe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(hello(parent)); err != nil {
			t.Fatal(err)
		}
		_, err = s.Recv()
		wantCode(t, "Subscribe with hello parent "+parent, err, codes.PermissionDenied)
	}
	// The IPAM never registered a node under B.
	anns, err := ipamv1.NewAnnouncerServiceClient(admin).ListAnnouncers(t.Context(), &ipamv1.ListAnnouncersRequest{Parent: "tenants/" + tb})
	if err != nil || len(anns.GetAnnouncers()) != 0 {
		t.Errorf("announcers of B after refused hellos: %v, %v", anns.GetAnnouncers(), err)
	}

	sctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s, err := ann.Subscribe(sctx)
	if err != nil {
		t.Fatal(err)
	}
	// One goroutine sends: the hello, then heartbeats (the IPAM ends a
	// session that misses three), then, when asked, a hello naming B.
	sendBad := make(chan struct{})
	go func() {
		if s.Send(hello("tenants/"+ta)) != nil {
			return
		}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-sendBad:
				_ = s.Send(hello("tenants/" + tb))
				return
			case <-tick.C:
				if s.Send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Heartbeat{Heartbeat: &ipamv1.Heartbeat{}}}) != nil {
					return
				}
			}
		}
	}()
	l2 := map[string]bool{}
	for !l2[aAlloc.GetAddresses()[0]] {
		msg, err := s.Recv()
		if err != nil {
			t.Fatalf("own Subscribe, waiting for A's address %s in the plan: %v", aAlloc.GetAddresses()[0], err)
		}
		if snap := msg.GetSnapshot(); snap != nil {
			clear(l2)
			for _, a := range snap.GetL2Addresses() {
				l2[a.GetAddress()] = true
			}
		}
		for _, a := range msg.GetChange().GetUpsertL2Addresses() {
			l2[a.GetAddress()] = true
		}
		for _, a := range msg.GetChange().GetRemoveL2Addresses() {
			delete(l2, a)
		}
		if l2[bAlloc.GetAddresses()[0]] {
			t.Fatalf("announcer of A told to answer for B's %s", bAlloc.GetAddresses()[0])
		}
	}
	close(sendBad)
	for {
		if _, err = s.Recv(); err != nil {
			break
		}
	}
	wantCode(t, "second hello naming B", err, codes.PermissionDenied)
}
