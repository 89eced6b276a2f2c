package frontdoor_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/beaconlb/beacon/pkg/ipamtest"
	"github.com/beaconlb/beacon/pkg/telemetry"
	"github.com/beaconlb/beacon/pkg/testwait"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/gateway/internal/frontdoor"
	"github.com/beaconlb/beacon/services/gateway/internal/testenv"
)

// TestRESTProvisioning is what a provisioning system does with plain HTTPS
// and JSON (curl), from an admin bootstrap token to a tenant that
// allocates, watches, renews and releases.
func TestRESTProvisioning(t *testing.T) {
	ipam := ipamtest.Shared(t)
	env := testenv.Start(t, testenv.Options{IPAM: []string{ipam.Addr}})
	admin := env.Admin()
	hc := env.HTTP(t, testenv.Cred{})
	call := func(cred testenv.Cred, method, path, body string, want int) map[string]any {
		t.Helper()
		res := do(t, hc, env.Request(t, cred, method, path, body))
		if res.Code != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, res.Code, res.Body, want)
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(res.Body), &out); err != nil {
			t.Fatalf("%s %s: body %q is not JSON: %v", method, path, res.Body, err)
		}
		return out
	}

	call(admin, "POST", "/v1/pools?poolId=prov-pool", `{"ranges":["2001:db8:a206::/120"],"tenants":["prov"]}`, http.StatusOK)
	call(admin, "PATCH", "/v1/pools/prov-pool", `{"description":"provisioning"}`, http.StatusOK)
	call(admin, "POST", "/v1/tenants?tenantId=prov", `{"displayName":"Provisioning","maxAddresses":10}`, http.StatusOK)
	tok := call(admin, "POST", "/v1/tokens?tokenId=prov-system", `{"role":"ROLE_TENANT","tenant":"tenants/prov"}`, http.StatusOK)
	secret, _ := tok["secret"].(string)
	if !strings.HasPrefix(secret, "bct_") {
		t.Fatalf("CreateToken secret = %v", tok)
	}
	prov := testenv.Token(secret)

	// The tenant watches its allocations over REST while it works.
	wctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	wresp, err := hc.Do(env.Request(t, prov, "GET", "/v1/tenants/prov/allocations:watch", "").WithContext(wctx))
	if err != nil {
		t.Fatal(err)
	}
	defer wresp.Body.Close()
	lines := bufio.NewReader(wresp.Body)
	first, err := lines.ReadString('\n')
	if err != nil || !strings.Contains(first, `"snapshotComplete":true`) {
		t.Fatalf("watch snapshot: %q, %v", first, err)
	}

	got := call(prov, "POST", "/v1/tenants/prov/allocations:allocate", `{"allocation":{"owner":"machine-42","ttl":"600s"},"requestId":"3f2b8a4e-1c1d-4a35-9a8a-111111111111"}`, http.StatusOK)
	a, _ := got["allocation"].(map[string]any)
	name, _ := a["name"].(string)
	if !strings.HasPrefix(name, "tenants/prov/allocations/") || got["created"] != true {
		t.Fatalf("Allocate = %v", got)
	}
	ev, err := lines.ReadString('\n')
	if err != nil || !strings.Contains(ev, name) || !strings.Contains(ev, "TYPE_PUT") {
		t.Errorf("watch event after Allocate: %q, %v", ev, err)
	}
	call(prov, "GET", "/v1/"+name, "", http.StatusOK)
	if l := call(prov, "GET", "/v1/tenants/prov/allocations?filter=owner%20%3D%20%22machine-42%22", "", http.StatusOK); len(l["allocations"].([]any)) != 1 {
		t.Errorf("filtered list = %v", l)
	}
	call(prov, "POST", "/v1/"+name+":renew", `{"ttl":"1200s"}`, http.StatusOK)
	call(prov, "PATCH", "/v1/"+name+"?updateMask=owner_labels", `{"ownerLabels":{"rack":"r1"}}`, http.StatusOK)
	call(prov, "GET", "/v1/pools/prov-pool", "", http.StatusOK)
	call(prov, "GET", "/v1/tenants/prov", "", http.StatusOK)
	rel := call(prov, "POST", "/v1/"+name+":release", `{"hold":"0s"}`, http.StatusOK)
	if addrs, _ := rel["addresses"].([]any); len(addrs) != 1 {
		t.Errorf("Release = %v", rel)
	}
	audit := call(prov, "GET", "/v1/tenants/prov/auditRecords", "", http.StatusOK)
	recs, _ := audit["auditRecords"].([]any)
	if len(recs) < 2 {
		t.Fatalf("audit = %v", audit)
	}
	for _, r := range recs {
		if actor := r.(map[string]any)["actor"]; actor != "token:prov-system" {
			t.Errorf("audit actor %v, want token:prov-system", actor)
		}
	}
	e := decodeError(t, do(t, hc, env.Request(t, prov, "GET", "/v1/"+name, "")).Body)
	if e.Code != 5 || len(e.Details) == 0 {
		t.Errorf("GET of a released allocation = %+v, want NOT_FOUND with details", e)
	}
	call(admin, "DELETE", "/v1/tokens/prov-system", "", http.StatusOK)
}

// TestActor checks the beacon-actor the IPAM records: the authenticated
// identity, never what the client claims.
func TestActor(t *testing.T) {
	ipam := ipamtest.Shared(t)
	env := testenv.Start(t, testenv.Options{IPAM: []string{ipam.Addr}})
	createPool(t, env, "actor-pool", "2001:db8:a207::/120", "actor")
	secret := env.IssueToken(t, "actor-adapter", ipamv1.Role_ROLE_TENANT, "actor")

	ctx := metadata.AppendToOutgoingContext(t.Context(), "beacon-actor", "admin-impersonated", "beacon-gateway-client-cert", "beacon://admin")
	alloc := ipamv1.NewAllocationServiceClient(env.Conn(t, testenv.Token(secret)))
	if _, err := alloc.Allocate(ctx, &ipamv1.AllocateRequest{Parent: "tenants/actor", Allocation: &ipamv1.Allocation{Owner: "ns/grpc"}}); err != nil {
		t.Fatal(err)
	}
	r := env.Request(t, testenv.Cred{}, "POST", "/v1/tenants/actor/allocations:allocate", `{"allocation":{"owner":"ns/rest"}}`)
	r.Header.Set("Grpc-Metadata-Beacon-Actor", "admin-impersonated")
	r.Header.Set("Beacon-Actor", "admin-impersonated")
	r.Header.Set("Grpc-Metadata-Beacon-Gateway-Client-Cert", "beacon://admin")
	if res := do(t, env.HTTP(t, testenv.Cert("beacon://tenant/actor")), r); res.Code != http.StatusOK {
		t.Fatalf("REST allocate = %d %s", res.Code, res.Body)
	}
	audit, err := ipamv1.NewAuditServiceClient(env.Conn(t, env.Admin())).ListAuditRecords(t.Context(), &ipamv1.ListAuditRecordsRequest{Parent: "tenants/actor"})
	if err != nil {
		t.Fatal(err)
	}
	actors := map[string]string{}
	for _, rec := range audit.GetAuditRecords() {
		actors[rec.GetOwner()] = rec.GetActor()
	}
	if actors["ns/grpc"] != "token:actor-adapter" || actors["ns/rest"] != "cert:tenant/actor" {
		t.Errorf("audit actors = %v, want ns/grpc by token:actor-adapter and ns/rest by cert:tenant/actor", actors)
	}

	// A client cannot pose as a forwarded certificate on the TLS listener:
	// with no credentials, the forged metadata alone is Unauthenticated.
	_, err = ipamv1.NewPoolServiceClient(env.Conn(t, testenv.Cred{})).ListPools(ctx, &ipamv1.ListPoolsRequest{})
	wantCode(t, "forged forwarded certificate over gRPC", err, 16)
}

// TestTracePropagation sends a call carrying W3C trace context and checks
// that the gateway's server span continues the caller's trace and that the
// call to the IPAM is a client span of the same trace, whose context
// otelgrpc injects into the outgoing metadata.
func TestTracePropagation(t *testing.T) {
	ipam := ipamtest.Shared(t)
	spans := tracetest.NewInMemoryExporter()
	tel, err := telemetry.New(t.Context(), telemetry.Config{ServiceName: "gateway-test"}, telemetry.WithSpanExporter(spans))
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Options{IPAM: []string{ipam.Addr}, Telemetry: tel})
	traceID, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	spanID, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	parent := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, Remote: true,
	}))
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(parent, carrier)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "traceparent", carrier["traceparent"])
	if _, err := ipamv1.NewPoolServiceClient(env.Conn(t, env.Admin())).ListPools(ctx, &ipamv1.ListPoolsRequest{}); err != nil {
		t.Fatal(err)
	}
	// And over REST.
	r := env.Request(t, env.Admin(), "GET", "/v1/tenants", "")
	r.Header.Set("traceparent", carrier["traceparent"])
	if res := do(t, env.HTTP(t, testenv.Cred{}), r); res.Code != http.StatusOK {
		t.Fatalf("REST = %d %s", res.Code, res.Body)
	}
	// A server span ends when its RPC's last event is handled, which may
	// come after the caller has its answer: wait for the spans a while.
	names := []string{"beacon.ipam.v1.PoolService/ListPools", "beacon.ipam.v1.TenantService/ListTenants"}
	var kinds map[string][]trace.SpanKind
	missing := func() []string {
		kinds = map[string][]trace.SpanKind{}
		for _, s := range spans.GetSpans() {
			if s.SpanContext.TraceID() == traceID {
				kinds[s.Name] = append(kinds[s.Name], s.SpanKind)
			}
		}
		var out []string
		for _, name := range names {
			var server, client bool
			for _, k := range kinds[name] {
				server = server || k == trace.SpanKindServer
				client = client || k == trace.SpanKindClient
			}
			if !server || !client {
				out = append(out, name)
			}
		}
		return out
	}
	// The spans end after the answers; wait for them (then report those missing).
	_ = testwait.Poll(t.Context(), 30*time.Second, func() error {
		if len(missing()) > 0 {
			return testwait.ErrNotYet
		}
		return nil
	})
	for _, name := range missing() {
		t.Errorf("%s spans in the caller's trace: %v; want a server span and a client span to the IPAM", name, kinds[name])
	}
}

// TestOpenAPIAndConsole checks /openapi.json and that non-API paths reach
// the console handler.
func TestOpenAPIAndConsole(t *testing.T) {
	ipam := ipamtest.Shared(t)
	console := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("console " + r.URL.Path))
	})
	env := testenv.Start(t, testenv.Options{IPAM: []string{ipam.Addr}, Config: func(c *frontdoor.Config) { c.Console = console }})
	hc := env.HTTP(t, testenv.Cred{})
	res := do(t, hc, env.Request(t, testenv.Cred{}, "GET", "/openapi.json", ""))
	var doc struct {
		Swagger string                    `json:"swagger"`
		Info    struct{ Title string }    `json:"info"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if res.Code != http.StatusOK || json.Unmarshal([]byte(res.Body), &doc) != nil {
		t.Fatalf("/openapi.json = %d %.200s", res.Code, res.Body)
	}
	if doc.Swagger != "2.0" || doc.Info.Title != "Beacon IPAM API" {
		t.Errorf("document header: %q %q", doc.Swagger, doc.Info.Title)
	}
	for path, verb := range map[string]string{
		"/v1/tenants/{tenant}/allocations:allocate":             "post",
		"/v1/tenants/{tenant}/allocations/{allocation}:release": "post",
		"/v1/pools/{pool}": "patch",
		"/v1/tenants/{tenant}/l2Advertisements/{l2Advertisement}": "delete",
		"/v1/tenants/{tenant}/announcers/{announcer}:drain":       "post",
		"/v1/tokens": "post",
	} {
		if doc.Paths[path][verb] == nil {
			t.Errorf("OpenAPI lacks %s %s", verb, path)
		}
	}
	ops := 0
	for path, verbs := range doc.Paths {
		for verb, op := range verbs {
			ops++
			id, _ := op.(map[string]any)["operationId"].(string)
			if strings.HasSuffix(id, "_VerifyToken") || strings.HasSuffix(id, "_Subscribe") {
				t.Errorf("OpenAPI documents %s (%s %s), which has no HTTP rule", id, verb, path)
			}
		}
	}
	if ops != 61 {
		t.Errorf("OpenAPI has %d operations, want 61 (every method but Subscribe and VerifyToken)", ops)
	}
	for _, p := range []string{"/", "/console/app.js", "/v1x"} {
		if res := do(t, hc, env.Request(t, testenv.Cred{}, "GET", p, "")); res.Body != "console "+p {
			t.Errorf("GET %s = %d %q, want the console", p, res.Code, res.Body)
		}
	}
}
