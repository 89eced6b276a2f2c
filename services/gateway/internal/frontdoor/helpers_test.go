package frontdoor_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/gateway/internal/testenv"
)

func createPool(t *testing.T, env *testenv.Env, id, cidr string, tenants ...string) {
	t.Helper()
	_, err := ipamv1.NewPoolServiceClient(env.Conn(t, env.Admin())).CreatePool(t.Context(), &ipamv1.CreatePoolRequest{
		PoolId: id, Pool: &ipamv1.Pool{Ranges: []string{cidr}, Tenants: tenants},
	})
	if err != nil {
		t.Fatalf("CreatePool %s: %v", id, err)
	}
}

func allocate(t *testing.T, conn *grpc.ClientConn, tenant, owner, pool string) *ipamv1.Allocation {
	t.Helper()
	resp, err := ipamv1.NewAllocationServiceClient(conn).Allocate(t.Context(), &ipamv1.AllocateRequest{
		Parent:     "tenants/" + tenant,
		Allocation: &ipamv1.Allocation{Owner: owner, RequestedPool: "pools/" + pool, Ttl: durationpb.New(3600e9)},
	})
	if err != nil {
		t.Fatalf("Allocate %s for %s: %v", owner, tenant, err)
	}
	return resp.GetAllocation()
}

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("%s = %v, want %v", what, err, want)
	}
}

type httpResult struct {
	Code   int
	Body   string
	Header http.Header
}

func do(t *testing.T, c *http.Client, r *http.Request) httpResult {
	t.Helper()
	resp, err := c.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", r.Method, r.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", r.Method, r.URL, err)
	}
	return httpResult{Code: resp.StatusCode, Body: string(b), Header: resp.Header}
}

// errorBody is the JSON error of the REST edge (google.rpc.Status).
type errorBody struct {
	Code    int               `json:"code"`
	Message string            `json:"message"`
	Details []json.RawMessage `json:"details"`
}

func decodeError(t *testing.T, body string) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	return e
}
