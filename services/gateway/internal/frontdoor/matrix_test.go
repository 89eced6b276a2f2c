package frontdoor_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/beaconlb/beacon/pkg/ipamtest"
	"github.com/beaconlb/beacon/services/gateway/internal/testenv"

	"github.com/beaconlb/beacon/proto/apimethods"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func TestMain(m *testing.M) { ipamtest.Main(m) }

func sample(t *testing.T, md protoreflect.MethodDescriptor, tenant, pool string) proto.Message {
	t.Helper()
	req, err := apimethods.SampleRequest(md, tenant, pool, "matrix-node")
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// allowed is the spec of who may call what, from the prose and
// independent of policy.Table().
func allowed(method, role string) bool {
	svc, m, _ := strings.Cut(strings.TrimPrefix(method, "/beacon.ipam.v1."), "/")
	if m == "VerifyToken" || m == "WatchTokenRevocations" || m == "CreateNodeCertificate" {
		return false
	}
	read := strings.HasPrefix(m, "Get") || strings.HasPrefix(m, "List") || strings.HasPrefix(m, "Watch")
	switch role {
	case "admin":
		return true
	case "viewer":
		return read
	case "tenant":
		switch svc {
		case "AllocationService", "AnnouncementService", "AuditService":
			return true
		case "PoolService":
			return read
		case "AnnouncerService":
			return m != "Subscribe"
		case "TenantService":
			return m == "GetTenant"
		}
	case "announcer":
		return m == "Subscribe"
	}
	return false
}

// TestMethodRoleMatrix calls every method of every service, generated
// from the proto descriptors, as every role and as nobody, through a real
// gateway in front of a real ipamd, and checks each cell: allowed calls
// reach the IPAM (whatever it answers), denied ones are PermissionDenied,
// anonymous ones Unauthenticated.
func TestMethodRoleMatrix(t *testing.T) {
	ipam := ipamtest.Shared(t)
	env := testenv.Start(t, testenv.Options{IPAM: []string{ipam.Addr}})
	const tenant, pool = "matrix", "matrix-pool"
	admin := ipamv1.NewPoolServiceClient(env.Conn(t, env.Admin()))
	if _, err := admin.CreatePool(t.Context(), &ipamv1.CreatePoolRequest{PoolId: pool, Pool: &ipamv1.Pool{Ranges: []string{"2001:db8:a200::/120"}}}); err != nil {
		t.Fatal(err)
	}

	conns := map[string]*grpc.ClientConn{
		"admin":     env.Conn(t, testenv.Cert("beacon://admin")),
		"viewer":    env.Conn(t, testenv.Cert("beacon://viewer")),
		"tenant":    env.Conn(t, testenv.Cert("beacon://tenant/"+tenant)),
		"announcer": env.Conn(t, testenv.Cert("beacon://announcer/"+tenant)),
		"nobody":    env.Conn(t, testenv.Cred{}),
	}
	methods := apimethods.Methods()
	cells := 0
	for _, md := range methods {
		method := apimethods.FullMethod(md)
		for _, role := range []string{"admin", "viewer", "tenant", "announcer", "nobody"} {
			cells++
			got := apimethods.Call(t.Context(), conns[role], md, sample(t, md, tenant, pool))
			switch {
			case role == "nobody":
				if got != codes.Unauthenticated {
					t.Errorf("%s as nobody = %v, want Unauthenticated", method, got)
				}
			case allowed(method, role):
				if got == codes.PermissionDenied || got == codes.Unauthenticated || got == codes.Unimplemented {
					t.Errorf("%s as %s = %v, want the call to reach the IPAM", method, role, got)
				}
			default:
				if got != codes.PermissionDenied {
					t.Errorf("%s as %s = %v, want PermissionDenied", method, role, got)
				}
			}
		}
	}
	t.Logf("%d methods × 5 callers = %d cells checked", len(methods), cells)

	// A method the API does not have.
	err := conns["admin"].Invoke(t.Context(), "/beacon.ipam.v1.PoolService/Nope", &ipamv1.GetPoolRequest{}, &ipamv1.GetPoolResponse{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("unknown method = %v, want Unimplemented", err)
	}
}
