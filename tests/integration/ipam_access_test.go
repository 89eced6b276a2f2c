package integration

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/beaconlb/beacon/pkg/devcerts"
	"github.com/beaconlb/beacon/proto/apimethods"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// secureIPAM is an ipamd that requires client certificates, and the
// certificates of its callers.
type secureIPAM struct {
	d     *daemon
	ca    *devcerts.CA
	certs string
}

func startSecureIPAM(t *testing.T) *secureIPAM {
	t.Helper()
	dir := t.TempDir()
	p, err := devcerts.Ensure(filepath.Join(dir, "certs"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(p.CA)
	keyPEM, _ := os.ReadFile(p.CAKey)
	ca, err := devcerts.LoadCA(caPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	d := startIPAMD(t, "--data-dir", filepath.Join(dir, "data"), "--release-hold", "0s",
		"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey, "--tls-client-ca", p.CA)
	return &secureIPAM{d: d, ca: ca, certs: p.CA}
}

// conn dials the IPAM as identity ("" for a certificate without one).
func (s *secureIPAM) conn(t *testing.T, identity string) *grpc.ClientConn {
	t.Helper()
	if identity == "" {
		identity = "beacon://admin" // our CA, but no SPIFFE ID
	}
	cert, err := s.ca.ClientTLS(identity)
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: s.ca.Pool(), MinVersion: tls.VersionTLS13}
	conn, err := grpc.NewClient(s.d.grpc, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

const (
	accessTenant = "c1"
	accessNode   = "n1"
	accessPool   = "c1-pool"
)

var accessIDs = map[string]string{
	"gateway":   "spiffe://beacon/gateway",
	"admin":     "spiffe://beacon/admin/ops",
	"adapter":   "spiffe://beacon/tenant/" + accessTenant + "/adapter/prod",
	"announcer": "spiffe://beacon/tenant/" + accessTenant + "/announcer/" + accessNode,
}

// accessSpec is who may call what (issue #14), independent of the
// IPAM's table: "allow", "deny", or "scoped" (allowed for the caller's own
// tenant, node or pools only).
func accessSpec(method, role string) string {
	svc, m, _ := strings.Cut(strings.TrimPrefix(method, "/beacon.ipam.v1."), "/")
	switch role {
	case "gateway", "admin":
		return "allow"
	case "announcer":
		if m == "Subscribe" {
			return "scoped"
		}
	case "adapter":
		switch svc {
		case "AllocationService", "AnnouncementService", "AuditService", "PoolService":
			return "scoped"
		case "AnnouncerService":
			if m != "Subscribe" {
				return "scoped"
			}
		case "TenantService":
			if m == "GetTenant" {
				return "scoped"
			}
		}
	}
	return "deny"
}

// TestIPAMMethodRoleMatrix drives every cell of the IPAM's method × role
// table against a real ipamd over real mutual TLS: every method of the API
// as the gateway, an admin, an adapter and an announcer, with a request
// about the caller's own tenant (and node) and one about another tenant's,
// and as a caller whose certificate carries no Beacon identity.
func TestIPAMMethodRoleMatrix(t *testing.T) {
	s := startSecureIPAM(t)
	ctx := context.Background()
	admin := s.conn(t, accessIDs["admin"])
	if _, err := ipamv1.NewPoolServiceClient(admin).CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: accessPool,
		Pool: &ipamv1.Pool{Ranges: []string{"192.0.2.0/28"}, Tenants: []string{accessTenant}}}); err != nil {
		t.Fatal(err)
	}
	conns := map[string]*grpc.ClientConn{"nobody": s.conn(t, "")}
	for role, id := range accessIDs {
		conns[role] = s.conn(t, id)
	}
	sample := func(md protoreflect.MethodDescriptor, tenant, pool, node string) proto.Message {
		req, err := apimethods.SampleRequest(md, tenant, pool, node)
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	cells := 0
	for _, md := range apimethods.Methods() {
		method := apimethods.FullMethod(md)
		for _, role := range []string{"gateway", "admin", "adapter", "announcer", "nobody"} {
			cells++
			own := apimethods.Call(ctx, conns[role], md, sample(md, accessTenant, accessPool, accessNode))
			other := apimethods.Call(ctx, conns[role], md, sample(md, "c2", "other-pool", "n9"))
			reached := func(c codes.Code) bool {
				return c != codes.PermissionDenied && c != codes.Unauthenticated && c != codes.Unimplemented
			}
			switch spec := accessSpec(method, role); {
			case role == "nobody":
				if own != codes.Unauthenticated {
					t.Errorf("%s without an identity = %v, want Unauthenticated", method, own)
				}
			case spec == "allow":
				if !reached(own) || !reached(other) {
					t.Errorf("%s as %s = %v / %v, want the call to reach the IPAM", method, role, own, other)
				}
			case spec == "deny":
				if own != codes.PermissionDenied || other != codes.PermissionDenied {
					t.Errorf("%s as %s = %v / %v, want PermissionDenied", method, role, own, other)
				}
			case method == "/beacon.ipam.v1.PoolService/CreatePool" || method == "/beacon.ipam.v1.PoolService/UpdatePool":
				// The sample pool serves every tenant: not the adapter's to make.
				if own != codes.PermissionDenied {
					t.Errorf("%s as %s of a pool for every tenant = %v, want PermissionDenied", method, role, own)
				}
			case strings.HasPrefix(method, "/beacon.ipam.v1.PoolService/Get") || strings.HasPrefix(method, "/beacon.ipam.v1.PoolService/List") || method == "/beacon.ipam.v1.PoolService/DeletePool":
				if !reached(own) {
					t.Errorf("%s as %s of its own pool = %v, want the call to reach the IPAM", method, role, own)
				}
			default:
				if !reached(own) {
					t.Errorf("%s as %s for its own = %v, want the call to reach the IPAM", method, role, own)
				}
				if other != codes.PermissionDenied {
					t.Errorf("%s as %s for another tenant or node = %v, want PermissionDenied", method, role, other)
				}
			}
		}
	}
	t.Logf("%d methods × 5 callers = %d cells, each for its own and for another tenant", len(apimethods.Methods()), cells)
}

// TestCompromisedNode plays root on one node: with that node's announcer
// credentials it tries to act as another node, as another tenant's node,
// to read other tenants' allocations and other nodes' peers, and to mint a
// token. Every attempt is refused, logged and counted; its own session
// works and its plan carries the secrets of its own peers only.
func TestCompromisedNode(t *testing.T) {
	s := startSecureIPAM(t)
	ctx := context.Background()
	admin := s.conn(t, accessIDs["admin"])
	cfg := ipamv1.NewAnnouncementServiceClient(admin)
	for _, p := range []struct{ id, node, addr string }{{"mine", accessNode, "192.0.2.1"}, {"theirs", "n2", "192.0.2.2"}} {
		if _, err := cfg.CreateBGPPeer(ctx, &ipamv1.CreateBGPPeerRequest{Parent: "tenants/" + accessTenant, BgpPeerId: p.id, BgpPeer: &ipamv1.BGPPeer{
			MyAsn: 64512, PeerAsn: 64513, PeerAddress: p.addr, Password: "secret-" + p.id,
			NodeSelectors: []*ipamv1.LabelSelector{{MatchLabels: map[string]string{"node": p.node}}},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	node := s.conn(t, accessIDs["announcer"])
	subscribe := func(parent, name string) (*ipamv1.SubscribeResponse, codes.Code) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		st, err := ipamv1.NewAnnouncerServiceClient(node).Subscribe(cctx)
		if err != nil {
			return nil, status.Code(err)
		}
		if err := st.Send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Hello{Hello: &ipamv1.SubscribeHello{
			Parent: parent, Node: name, Labels: map[string]string{"node": name}}}}); err != nil {
			return nil, status.Code(err)
		}
		resp, err := st.Recv()
		return resp, status.Code(err)
	}
	attempts := []struct {
		what string
		do   func() codes.Code
	}{
		{"subscribe as another node", func() codes.Code { _, c := subscribe("tenants/"+accessTenant, "n2"); return c }},
		{"subscribe as another tenant's node", func() codes.Code { _, c := subscribe("tenants/c2", accessNode); return c }},
		{"list another tenant's allocations", func() codes.Code {
			_, err := ipamv1.NewAllocationServiceClient(node).ListAllocations(ctx, &ipamv1.ListAllocationsRequest{Parent: "tenants/c2"})
			return status.Code(err)
		}},
		{"list its own tenant's allocations", func() codes.Code {
			_, err := ipamv1.NewAllocationServiceClient(node).ListAllocations(ctx, &ipamv1.ListAllocationsRequest{Parent: "tenants/" + accessTenant})
			return status.Code(err)
		}},
		{"read the peers", func() codes.Code {
			_, err := ipamv1.NewAnnouncementServiceClient(node).ListBGPPeers(ctx, &ipamv1.ListBGPPeersRequest{Parent: "tenants/" + accessTenant})
			return status.Code(err)
		}},
		{"mint an admin token", func() codes.Code {
			_, err := ipamv1.NewTokenServiceClient(node).CreateToken(ctx, &ipamv1.CreateTokenRequest{TokenId: "pwned", Token: &ipamv1.Token{Role: ipamv1.Role_ROLE_ADMIN}})
			return status.Code(err)
		}},
		{"allocate", func() codes.Code {
			_, err := ipamv1.NewAllocationServiceClient(node).Allocate(ctx, &ipamv1.AllocateRequest{Parent: "tenants/" + accessTenant, Allocation: &ipamv1.Allocation{Owner: "x/y"}})
			return status.Code(err)
		}},
		{"drain another node", func() codes.Code {
			_, err := ipamv1.NewAnnouncerServiceClient(node).DrainAnnouncer(ctx, &ipamv1.DrainAnnouncerRequest{Name: "tenants/" + accessTenant + "/announcers/n2"})
			return status.Code(err)
		}},
	}
	for _, a := range attempts {
		if got := a.do(); got != codes.PermissionDenied {
			t.Errorf("%s: %v, want PermissionDenied", a.what, got)
		}
	}
	logs := s.d.waitLogs(func(logs string) bool { return strings.Count(logs, `"msg":"call refused"`) >= len(attempts) })
	if n := strings.Count(logs, `"msg":"call refused"`); n < len(attempts) {
		t.Errorf("%d refusals logged, want %d:\n%s", n, len(attempts), logs)
	}
	_, metrics := httpGet(t, "http://"+s.d.ops+"/metrics")
	if !strings.Contains(metrics, "beacon_ipam_access_denied_total") || !strings.Contains(metrics, `role="announcer"`) {
		t.Errorf("refusals not counted in beacon_ipam_access_denied_total:\n%s", grepLines(metrics, "denied"))
	}

	// Its own session works, and its plan has its own peer's password only.
	resp, code := subscribe("tenants/"+accessTenant, accessNode)
	if code != codes.OK {
		t.Fatalf("its own session: %v", code)
	}
	var peers []string
	for _, p := range resp.GetSnapshot().GetPeers() {
		peers = append(peers, p.GetPeer().GetName()+"="+p.GetPeer().GetPassword())
	}
	if want := "tenants/" + accessTenant + "/bgpPeers/mine=secret-mine"; len(peers) != 1 || peers[0] != want {
		t.Errorf("plan peers %v, want [%s]", peers, want)
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
