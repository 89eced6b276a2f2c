package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/beaconlb/beacon/services/gateway/internal/policy"
	"github.com/beaconlb/beacon/services/gateway/internal/testenv"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// allowed is the spec of who may call what, from the prose and
// independent of policy.Table.
func allowed(method, role string) bool {
	svc, m, _ := strings.Cut(strings.TrimPrefix(method, "/beacon.ipam.v1."), "/")
	if m == "VerifyToken" || m == "WatchTokenRevocations" {
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

// matrixRequest builds a request for md that a caller of tenant would
// send: parent and name fields point at the tenant (or at the pool, tenant
// or token the method is about), and so do the names of the resource a
// Create or Update carries and the hello of a Subscribe. Deletes and
// updates name resources that do not exist, so the matrix changes little.
func matrixRequest(t *testing.T, md protoreflect.MethodDescriptor, tenant, pool string) proto.Message {
	t.Helper()
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		t.Fatal(err)
	}
	verb := string(md.Name())
	id := "m1"
	if strings.HasPrefix(verb, "Delete") || strings.HasPrefix(verb, "Update") || strings.HasPrefix(verb, "Undrain") || strings.HasPrefix(verb, "Drain") {
		id = "absent"
	}
	var name string
	switch md.Parent().Name() {
	case "PoolService":
		name = "pools/" + pool
		if id == "absent" {
			name = "pools/absent"
		}
	case "TenantService":
		name = "tenants/" + tenant
	case "TokenService":
		name = "tokens/" + id
	default:
		name = "tenants/" + tenant + "/things/" + id
	}
	msg := mt.New()
	var fill func(m protoreflect.Message, depth int)
	fill = func(m protoreflect.Message, depth int) {
		fields := m.Descriptor().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			switch {
			case fd.IsList() || fd.IsMap():
			case fd.Kind() == protoreflect.StringKind && fd.Name() == "parent":
				m.Set(fd, protoreflect.ValueOfString("tenants/"+tenant))
			case fd.Kind() == protoreflect.StringKind && fd.Name() == "name":
				m.Set(fd, protoreflect.ValueOfString(name))
			case fd.Kind() == protoreflect.StringKind && fd.Name() == "secret":
				m.Set(fd, protoreflect.ValueOfString("bct_matrix"))
			case fd.Kind() == protoreflect.StringKind && fd.Name() == "node":
				m.Set(fd, protoreflect.ValueOfString("matrix-node"))
			case fd.Kind() == protoreflect.MessageKind && depth == 0 && fd.Message().ParentFile().Package() == policy.APIPackage &&
				(fd.Message().Fields().ByName("name") != nil || fd.Message().Fields().ByName("parent") != nil):
				fill(m.Mutable(fd).Message(), depth+1)
			}
		}
	}
	fill(msg, 0)
	return msg.Interface()
}

// call makes one call of any kind and returns its status code.
func call(ctx context.Context, conn *grpc.ClientConn, md protoreflect.MethodDescriptor, req proto.Message) codes.Code {
	method := policy.FullMethod(md)
	mt, _ := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	resp := mt.New().Interface()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if !md.IsStreamingClient() && !md.IsStreamingServer() {
		return status.Code(conn.Invoke(ctx, method, req, resp))
	}
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: md.IsStreamingServer(), ClientStreams: md.IsStreamingClient()}, method)
	if err != nil {
		return status.Code(err)
	}
	if err := cs.SendMsg(req); err != nil && status.Code(err) != codes.Unknown {
		return status.Code(cs.RecvMsg(resp))
	}
	if !md.IsStreamingClient() {
		_ = cs.CloseSend()
	}
	return status.Code(cs.RecvMsg(resp))
}

// TestMethodRoleMatrix calls every method of every service, generated
// from the proto descriptors, as every role and as nobody, through a real
// gateway in front of a real ipamd, and checks each cell: allowed calls
// reach the IPAM (whatever it answers), denied ones are PermissionDenied,
// anonymous ones Unauthenticated.
func TestMethodRoleMatrix(t *testing.T) {
	ipam := testenv.SharedIPAM(t)
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
	methods := policy.Methods()
	cells := 0
	for _, md := range methods {
		method := policy.FullMethod(md)
		for _, role := range []string{"admin", "viewer", "tenant", "announcer", "nobody"} {
			cells++
			got := call(t.Context(), conns[role], md, matrixRequest(t, md, tenant, pool))
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
