package frontdoor_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// restRoute is a REST route that takes a JSON body, and the message the
// body must be.
type restRoute struct {
	method, path string
	body         func() proto.Message
}

const fuzzAlloc = "tenants/fuzz/allocations/a0123456789abcdef0123"

var restRoutes = []restRoute{
	{http.MethodPost, "/v1/pools", func() proto.Message { return &ipamv1.Pool{} }},
	{http.MethodPatch, "/v1/pools/p1", func() proto.Message { return &ipamv1.Pool{} }},
	{http.MethodPost, "/v1/tenants/fuzz/bgpPeers", func() proto.Message { return &ipamv1.BGPPeer{} }},
	{http.MethodPatch, "/v1/tenants/fuzz/bgpPeers/p1", func() proto.Message { return &ipamv1.BGPPeer{} }},
	{http.MethodPost, "/v1/tenants/fuzz/bgpAdvertisements", func() proto.Message { return &ipamv1.BGPAdvertisement{} }},
	{http.MethodPatch, "/v1/tenants/fuzz/bgpAdvertisements/a1", func() proto.Message { return &ipamv1.BGPAdvertisement{} }},
	{http.MethodPost, "/v1/tenants/fuzz/l2Advertisements", func() proto.Message { return &ipamv1.L2Advertisement{} }},
	{http.MethodPost, "/v1/tenants/fuzz/communities", func() proto.Message { return &ipamv1.Community{} }},
	{http.MethodPost, "/v1/tenants/fuzz/bfdProfiles", func() proto.Message { return &ipamv1.BFDProfile{} }},
	{http.MethodPost, "/v1/tenants/fuzz/nodes", func() proto.Message { return &ipamv1.Node{} }},
	{http.MethodPatch, "/v1/" + fuzzAlloc, func() proto.Message { return &ipamv1.Allocation{} }},
	{http.MethodPost, "/v1/" + fuzzAlloc + ":release", func() proto.Message { return &ipamv1.ReleaseRequest{} }},
	{http.MethodPost, "/v1/" + fuzzAlloc + ":renew", func() proto.Message { return &ipamv1.RenewAllocationRequest{} }},
	{http.MethodPost, "/v1/tenants", func() proto.Message { return &ipamv1.Tenant{} }},
	{http.MethodPost, "/v1/tokens", func() proto.Message { return &ipamv1.Token{} }},
}

// FuzzRESTBody feeds arbitrary bodies to the REST routes that take one
// (pools, BGP peers and advertisements, L2 advertisements, communities,
// BFD profiles, nodes, allocation updates, release, renew, tenants,
// tokens; PATCH routes infer their update mask from the body) through the
// gateway's real handler, in front of a stub IPAM that answers every call
// with an empty message. No body gets a 5xx; a body that is not the
// route's message in JSON gets a 4xx with a JSON error; an answer is
// always JSON.
func FuzzRESTBody(f *testing.F) {
	h := fuzzGateway(f)
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := restRoutes[int(route)%len(restRoutes)]
		req := httptest.NewRequest(r.method, "https://gateway"+r.path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer bct_fuzz-bootstrap-secret")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code := rec.Code
		if code >= 500 {
			t.Fatalf("%s %s body %q: status %d %s", r.method, r.path, body, code, rec.Body.String())
		}
		valid := len(bytes.TrimSpace(body)) == 0 || protojson.Unmarshal(body, r.body()) == nil
		if !valid && (code < 400 || code >= 500) {
			t.Fatalf("%s %s invalid body %q: status %d %s, want 4xx", r.method, r.path, body, code, rec.Body.String())
		}
		if !json.Valid(rec.Body.Bytes()) || !strings.Contains(rec.Header().Get("Content-Type"), "json") {
			t.Fatalf("%s %s body %q: status %d answer %q (%s) is not JSON", r.method, r.path, body, code, rec.Body.String(), rec.Header().Get("Content-Type"))
		}
	})
}
