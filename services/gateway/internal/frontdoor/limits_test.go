package frontdoor_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beaconlb/beacon/pkg/ipamtest"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/gateway/internal/frontdoor"
	"github.com/beaconlb/beacon/services/gateway/internal/testenv"
)

// TestRequestLimits sends oversize and malformed requests over gRPC and
// REST; each is refused cleanly, before the IPAM sees it.
func TestRequestLimits(t *testing.T) {
	ipam := ipamtest.Shared(t)
	env := testenv.Start(t, testenv.Options{IPAM: []string{ipam.Addr}})
	const tenant = "limits"
	cred := testenv.Cert("beacon://tenant/" + tenant)

	t.Run("gRPC message over 4 MiB", func(t *testing.T) {
		_, err := ipamv1.NewAllocationServiceClient(env.Conn(t, cred)).Allocate(t.Context(), &ipamv1.AllocateRequest{
			Parent: "tenants/" + tenant, Allocation: &ipamv1.Allocation{Owner: strings.Repeat("x", 5<<20)},
		})
		wantCode(t, "5 MiB Allocate", err, codes.ResourceExhausted)
	})

	hc := env.HTTP(t, cred)
	const path = "/v1/tenants/" + tenant + "/allocations:allocate"
	tests := []struct {
		name, body string
		status     int
	}{
		{"body over 1 MiB", `{"allocation":{"owner":"` + strings.Repeat("x", 1<<20) + `"}}`, http.StatusRequestEntityTooLarge},
		{"truncated JSON", `{"allocation":{"owner":`, http.StatusBadRequest},
		{"two JSON values", `{} {}`, http.StatusBadRequest},
		{"not JSON", `owner=x`, http.StatusBadRequest},
		{"unknown field", `{"allocation":{"ownr":"x"}}`, http.StatusBadRequest},
		{"wrong type", `{"allocation":{"owner":42}}`, http.StatusBadRequest},
		{"bad enum", `{"allocation":{"owner":"x","trafficPolicy":"SIDEWAYS"}}`, http.StatusBadRequest},
		{"array for a message", `{"allocation":[]}`, http.StatusBadRequest},
		{"invalid UTF-8", "{\"allocation\":{\"owner\":\"\xff\"}}", http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run("REST "+tt.name, func(t *testing.T) {
			res := do(t, hc, env.Request(t, testenv.Cred{}, "POST", path, tt.body))
			if res.Code != tt.status {
				t.Fatalf("status %d %s, want %d", res.Code, res.Body, tt.status)
			}
			if e := decodeError(t, res.Body); e.Code != int(codes.InvalidArgument) || e.Message == "" {
				t.Errorf("error body %s, want INVALID_ARGUMENT with a message", res.Body)
			}
		})
	}
	// Nothing was allocated by any of them.
	list, err := ipamv1.NewAllocationServiceClient(env.Conn(t, cred)).ListAllocations(t.Context(), &ipamv1.ListAllocationsRequest{Parent: "tenants/" + tenant})
	if err != nil || len(list.GetAllocations()) != 0 {
		t.Errorf("allocations after refused requests: %v, %v", list.GetAllocations(), err)
	}
}

// TestRateLimit floods as one tenant and checks the refusals (gRPC
// ResourceExhausted with RetryInfo, REST 429 with Retry-After), that
// another tenant is unaffected, and that waiting the advertised delay
// works.
func TestRateLimit(t *testing.T) {
	ipam := ipamtest.Shared(t)
	env := testenv.Start(t, testenv.Options{IPAM: []string{ipam.Addr}, Config: func(c *frontdoor.Config) {
		c.RateLimit, c.RateBurst = 5, 5
	}})
	noisy := ipamv1.NewAllocationServiceClient(env.Conn(t, testenv.Cert("beacon://tenant/noisy")))
	quiet := ipamv1.NewAllocationServiceClient(env.Conn(t, testenv.Cert("beacon://tenant/quiet")))
	list := func(c ipamv1.AllocationServiceClient, tenant string) error {
		_, err := c.ListAllocations(t.Context(), &ipamv1.ListAllocationsRequest{Parent: "tenants/" + tenant})
		return err
	}
	var limited error
	for range 20 {
		if err := list(noisy, "noisy"); err != nil {
			limited = err
			break
		}
	}
	st := status.Convert(limited)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("20 calls at once with a burst of 5: %v, want ResourceExhausted", limited)
	}
	var retry time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retry = ri.GetRetryDelay().AsDuration()
		}
	}
	if retry <= 0 || retry > 250*time.Millisecond {
		t.Errorf("RetryInfo delay = %v, want (0, 200ms] at 5 calls/s", retry)
	}
	if err := list(quiet, "quiet"); err != nil {
		t.Errorf("another tenant during the flood: %v", err)
	}
	time.Sleep(retry + 50*time.Millisecond)
	if err := list(noisy, "noisy"); err != nil {
		t.Errorf("after waiting the RetryInfo delay: %v", err)
	}

	// Refusals are held a moment, during which tokens come back: flood
	// again until REST is refused too.
	hc := env.HTTP(t, testenv.Cert("beacon://tenant/noisy"))
	var res httpResult
	for range 20 {
		if res = do(t, hc, env.Request(t, testenv.Cred{}, "GET", "/v1/tenants/noisy/allocations", "")); res.Code != http.StatusOK {
			break
		}
	}
	if res.Code != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "1" || decodeError(t, res.Body).Code != int(codes.ResourceExhausted) {
		t.Errorf("REST while limited = %d Retry-After=%q %s, want 429 with Retry-After 1", res.Code, res.Header.Get("Retry-After"), res.Body)
	}
}

// TestStreamsAndDeadlines checks the per-connection stream limit and the
// cap on unary deadlines (streams exempt).
func TestStreamsAndDeadlines(t *testing.T) {
	ipam := ipamtest.Shared(t)
	t.Run("streams per connection", func(t *testing.T) {
		env := testenv.Start(t, testenv.Options{IPAM: []string{ipam.Addr}, Config: func(c *frontdoor.Config) { c.MaxStreamsPerConn = 2 }})
		alloc := ipamv1.NewAllocationServiceClient(env.Conn(t, testenv.Cert("beacon://tenant/streams")))
		for i := range 2 {
			ws, err := alloc.WatchAllocations(t.Context(), &ipamv1.WatchAllocationsRequest{Parent: "tenants/streams"})
			if err == nil {
				_, err = ws.Recv()
			}
			if err != nil {
				t.Fatalf("watch %d: %v", i, err)
			}
		}
		// The third call on the same connection waits for a stream slot.
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err := alloc.ListAllocations(ctx, &ipamv1.ListAllocationsRequest{Parent: "tenants/streams"})
		wantCode(t, "third concurrent call on a connection allowing two streams", err, codes.DeadlineExceeded)
		// Another connection is not affected.
		other := ipamv1.NewAllocationServiceClient(env.Conn(t, testenv.Cert("beacon://tenant/streams")))
		if _, err := other.ListAllocations(t.Context(), &ipamv1.ListAllocationsRequest{Parent: "tenants/streams"}); err != nil {
			t.Errorf("call on another connection: %v", err)
		}
	})
	t.Run("unary deadline cap", func(t *testing.T) {
		env := testenv.Start(t, testenv.Options{IPAM: []string{ipam.Addr}, Config: func(c *frontdoor.Config) { c.MaxUnaryTimeout = time.Microsecond }})
		alloc := ipamv1.NewAllocationServiceClient(env.Conn(t, testenv.Cert("beacon://tenant/deadline")))
		_, err := alloc.ListAllocations(t.Context(), &ipamv1.ListAllocationsRequest{Parent: "tenants/deadline"})
		wantCode(t, "unary call without a client deadline under a 1µs cap", err, codes.DeadlineExceeded)
		ws, err := alloc.WatchAllocations(t.Context(), &ipamv1.WatchAllocationsRequest{Parent: "tenants/deadline"})
		if err == nil {
			_, err = ws.Recv()
		}
		if err != nil {
			t.Errorf("stream under the unary cap: %v", err)
		}
	})
}

// TestQuotaPassesThrough checks that the IPAM's per-tenant quota error
// reaches the caller as it is, over gRPC and REST.
func TestQuotaPassesThrough(t *testing.T) {
	ipam := ipamtest.Shared(t)
	env := testenv.Start(t, testenv.Options{IPAM: []string{ipam.Addr}})
	createPool(t, env, "quota-pool", "2001:db8:a204::/120", "quota")
	if _, err := ipamv1.NewTenantServiceClient(env.Conn(t, env.Admin())).CreateTenant(t.Context(), &ipamv1.CreateTenantRequest{
		TenantId: "quota", Tenant: &ipamv1.Tenant{MaxAddresses: 1},
	}); err != nil {
		t.Fatal(err)
	}
	cred := testenv.Cert("beacon://tenant/quota")
	allocate(t, env.Conn(t, cred), "quota", "ns/one", "quota-pool")
	_, err := ipamv1.NewAllocationServiceClient(env.Conn(t, cred)).Allocate(t.Context(), &ipamv1.AllocateRequest{
		Parent: "tenants/quota", Allocation: &ipamv1.Allocation{Owner: "ns/two", RequestedPool: "pools/quota-pool"},
	})
	wantCode(t, "allocation past the quota", err, codes.ResourceExhausted)
	res := do(t, env.HTTP(t, cred), env.Request(t, testenv.Cred{}, "POST", "/v1/tenants/quota/allocations:allocate", `{"allocation":{"owner":"ns/three"}}`))
	if res.Code != http.StatusTooManyRequests || !strings.Contains(res.Body, "QUOTA_EXCEEDED") {
		t.Errorf("REST allocation past the quota = %d %s", res.Code, res.Body)
	}
	if v := res.Header.Get("Retry-After"); v != "" {
		t.Errorf("quota refusal has Retry-After %q; waiting does not help", v)
	}
	// The tenant reads its own usage.
	tn, err := ipamv1.NewTenantServiceClient(env.Conn(t, cred)).GetTenant(t.Context(), &ipamv1.GetTenantRequest{Name: "tenants/quota"})
	if err != nil || tn.GetTenant().GetAddressesUsed() != 1 {
		t.Errorf("GetTenant own = %v, %v", tn, err)
	}
}
