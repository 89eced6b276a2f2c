package replica_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

// Page tokens are authenticated with a key the replicas share: a token
// from one replica continues the listing on another; a forged, altered or
// borrowed token is refused with INVALID_ARGUMENT naming page_token.
func TestPageTokens(t *testing.T) {
	env := sharedEtcd(t, "pagetokens")
	a := startNode(t, env.client, replica.Options{})
	b := startNode(t, env.client, replica.Options{})
	if _, err := a.pools.CreatePool(ctxT(t), &ipamv1.CreatePoolRequest{PoolId: "pt", Pool: &ipamv1.Pool{Ranges: []string{"198.51.100.0/28"}}}); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"pt1", "pt2"} {
		for i := range 3 {
			if _, err := a.allocs.Allocate(ctxT(t), &ipamv1.AllocateRequest{Parent: "tenants/" + tenant,
				Allocation: &ipamv1.Allocation{Owner: fmt.Sprintf("o%d", i), RequestedPool: "pools/pt"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	first, err := a.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/pt1", PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	token := first.GetNextPageToken()
	if token == "" {
		t.Fatal("no next page")
	}
	// Another replica continues the listing.
	next, err := b.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/pt1", PageSize: 1, PageToken: token})
	if err != nil {
		t.Fatalf("the token on another replica: %v", err)
	}
	if next.GetAllocations()[0].GetName() == first.GetAllocations()[0].GetName() {
		t.Fatal("the next page repeats the first")
	}

	payload, sum, _ := strings.Cut(token, ".")
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"a":"pt2/a","q":1}`))
	for _, tc := range []struct {
		name, token string
		req         *ipamv1.ListAllocationsRequest
	}{
		{"another tenant's listing", token, &ipamv1.ListAllocationsRequest{Parent: "tenants/pt2"}},
		{"another filter", token, &ipamv1.ListAllocationsRequest{Parent: "tenants/pt1", Filter: `pool = "pools/pt"`}},
		{"altered payload", base64.RawURLEncoding.EncodeToString([]byte(`{"a":"pt2/x","q":1}`)) + "." + sum, nil},
		{"forged, no signature", forged, nil},
		{"signature of another payload", forged + "." + sum, nil},
		{"truncated signature", payload + "." + sum[:len(sum)-2], nil},
		{"garbage", "!!!", nil},
	} {
		req := tc.req
		if req == nil {
			req = &ipamv1.ListAllocationsRequest{Parent: "tenants/pt1"}
		}
		req.PageSize, req.PageToken = 1, tc.token
		_, err := b.allocs.ListAllocations(ctxT(t), req)
		wantStatus(t, err, codes.InvalidArgument, "page_token")
	}
}
