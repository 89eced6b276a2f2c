package integration

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/beaconlb/beacon/pkg/devcerts"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// bearerToken sends "authorization: Bearer TOKEN", as announcerd
// --token-file does.
type bearerToken string

func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}
func (bearerToken) RequireTransportSecurity() bool { return true }

// kubeCluster makes, in one API server, what a cluster running announcers
// has: Nodes, ServiceAccounts and Pods bound to nodes. It returns a
// token of sa projected into a Pod on node for audience.
func kubeToken(ctx context.Context, t *testing.T, k *e2e.KubeAPI, sa, node, audience string) string {
	t.Helper()
	_, _ = k.Create(ctx, "/api/v1/nodes", map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": node}})
	_, _ = k.Create(ctx, "/api/v1/namespaces/kube-system/serviceaccounts", map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": sa}})
	pod := fmt.Sprintf("%s-%s-%d", sa, node, time.Now().UnixNano())
	uid, err := k.Create(ctx, "/api/v1/namespaces/kube-system/pods", map[string]any{
		"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": pod},
		"spec": map[string]any{
			"nodeName": node, "serviceAccountName": sa, "automountServiceAccountToken": false,
			"containers": []map[string]any{{"name": "announcerd", "image": "beacon/announcerd"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := k.PodToken(ctx, "kube-system", sa, audience, pod, uid)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestKubeAnnouncerTokens: an announcer in Kubernetes authenticates with
// its projected ServiceAccount token, which ipamd checks with a TokenReview
// at the cluster's real API server, and speaks for the node its Pod runs on
// only. A token of another audience, of a ServiceAccount not listed, or of
// another cluster is refused; every review is counted and every refusal
// logged.
func TestKubeAnnouncerTokens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	etcd, err := e2e.StartEtcd(requireEtcd(t), filepath.Join(dir, "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Stop) // after the API servers' Stop (cleanups run last first): etcd gone first makes them hang
	// Both API servers start at once (each takes seconds on a busy machine).
	names := []string{"prod", "other"}
	apis := make([]*e2e.KubeAPI, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { apis[i], errs[i] = e2e.StartKubeAPI(ctx, etcd, filepath.Join(dir, name), name) })
	}
	wg.Wait()
	for i, k := range apis {
		if k != nil {
			t.Cleanup(k.Stop)
		}
		if errors.Is(errs[i], e2e.ErrNoEtcd) && os.Getenv("BEACON_TESTBINS_REQUIRED") == "" {
			t.Skipf("SKIPPED %s: %v (make testbins builds it)", t.Name(), errs[i])
		}
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
	}
	prod, other := apis[0], apis[1]

	certs, err := devcerts.Ensure(filepath.Join(dir, "certs"))
	if err != nil {
		t.Fatal(err)
	}
	kubeAnnouncers := filepath.Join(dir, "kube-announcers.yaml")
	if err := os.WriteFile(kubeAnnouncers, fmt.Appendf(nil, `clusters:
- name: prod
  tenant: %s
  server: %s
  caFile: %s
  tokenFile: %s
  serviceAccounts: [kube-system/beacon-announcer]
`, accessTenant, prod.Host, prod.CAFile, prod.AdminTokenFile), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startIPAMD(t, "--data-dir", filepath.Join(dir, "data"), "--release-hold", "0s",
		"--tls-cert", certs.ServerCert, "--tls-key", certs.ServerKey, "--tls-client-ca", certs.CA,
		"--kube-announcers", kubeAnnouncers)
	caPEM, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := os.ReadFile(certs.CAKey)
	ca, err := devcerts.LoadCA(caPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}

	subscribe := func(token, parent, node string) codes.Code {
		tc := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS13} // server-verified TLS, no client certificate
		conn, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(credentials.NewTLS(tc)), grpc.WithPerRPCCredentials(bearerToken(token)))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		st, err := ipamv1.NewAnnouncerServiceClient(conn).Subscribe(cctx)
		if err != nil {
			return status.Code(err)
		}
		if err := st.Send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Hello{Hello: &ipamv1.SubscribeHello{Parent: parent, Node: node}}}); err != nil {
			_, err = st.Recv()
			return status.Code(err)
		}
		resp, err := st.Recv()
		if err == nil && resp.GetSnapshot() == nil {
			return codes.Unknown
		}
		return status.Code(err)
	}
	parent := "tenants/" + accessTenant
	nodeA := kubeToken(ctx, t, prod, "beacon-announcer", "node-a", "beacon-ipam")
	wrongAudience := kubeToken(ctx, t, prod, "beacon-announcer", "node-a", "kubernetes")
	unlisted := kubeToken(ctx, t, prod, "intruder", "node-a", "beacon-ipam")
	otherCluster := kubeToken(ctx, t, other, "beacon-announcer", "node-a", "beacon-ipam")
	nodeB := kubeToken(ctx, t, prod, "beacon-announcer", "node-b", "beacon-ipam")

	cases := []struct {
		what         string
		token        string
		parent, node string
		want         codes.Code
	}{
		{"a token bound to node-a subscribes as node-a", nodeA, parent, "node-a", codes.OK},
		{"again (the review is cached)", nodeA, parent, "node-a", codes.OK},
		{"the same token as node-b", nodeA, parent, "node-b", codes.PermissionDenied},
		{"the same token for another tenant", nodeA, "tenants/c2", "node-a", codes.PermissionDenied},
		{"a token for another audience", wrongAudience, parent, "node-a", codes.Unauthenticated},
		{"a ServiceAccount not listed", unlisted, parent, "node-a", codes.Unauthenticated},
		{"a token of another cluster", otherCluster, parent, "node-a", codes.Unauthenticated},
		{"not a token", "not-a-jwt", parent, "node-a", codes.Unauthenticated},
		{"the token for another audience again (the refusal is cached)", wrongAudience, parent, "node-a", codes.Unauthenticated},
	}
	for _, c := range cases {
		if got := subscribe(c.token, c.parent, c.node); got != c.want {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
	// With the cluster's API server gone, a token not seen before cannot be
	// checked: UNAVAILABLE (the announcer retries), not a refusal, and not
	// remembered.
	prod.Stop()
	if got := subscribe(nodeB, parent, "node-b"); got != codes.Unavailable {
		t.Errorf("a token while its API server is down: %v, want Unavailable", got)
	}

	// Client certificates work as before beside tokens; a caller with
	// neither is refused.
	admin := (&secureIPAM{d: d, ca: ca}).conn(t, accessIDs["admin"])
	if _, err := ipamv1.NewPoolServiceClient(admin).ListPools(ctx, &ipamv1.ListPoolsRequest{}); err != nil {
		t.Errorf("an admin certificate beside --kube-announcers: %v", err)
	}
	bare, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS13})))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bare.Close() }()
	if _, err := ipamv1.NewPoolServiceClient(bare).ListPools(ctx, &ipamv1.ListPoolsRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("no certificate and no token: %v, want Unauthenticated", err)
	}
	if t.Failed() {
		t.Logf("ipamd:\n%s", d.logText())
	}

	wantLogged := []string{"wrong audience", "is not an allowed ServiceAccount", "not this cluster", "not a JWT",
		`"caller":"spiffe://beacon/tenant/` + accessTenant + `/announcer/node-a"`}
	logs := d.waitLogs(func(logs string) bool { return containsAll(logs, wantLogged) })
	for _, want := range wantLogged {
		if !strings.Contains(logs, want) {
			t.Errorf("refusal %q not logged:\n%s", want, grepLines(logs, "call refused"))
		}
	}
	_, metrics := httpGet(t, "http://"+d.ops+"/metrics")
	for result, want := range map[string]float64{"accepted": 1, "unauthenticated": 2, "service_account": 1, "malformed": 1, "error": 1} {
		// One accepted review: the token's later uses are answered from
		// the cache.
		if got := countSample(metrics, "beacon_ipam_token_reviews_total", `result="`+result+`"`); got != want {
			t.Errorf("beacon_ipam_token_reviews_total{result=%q} = %v, want %v:\n%s", result, got, want, grepLines(metrics, "token_reviews"))
		}
	}
}

// countSample returns the value of the first sample of metric whose labels
// include label, or -1.
func countSample(metrics, metric, label string) float64 {
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, metric+"{") && strings.Contains(l, label) {
			var v float64
			if _, err := fmt.Sscan(l[strings.LastIndex(l, " ")+1:], &v); err == nil {
				return v
			}
		}
	}
	return -1
}
