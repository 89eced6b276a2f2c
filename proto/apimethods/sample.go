package apimethods

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// SampleRequest builds a request for md that a caller of tenant would
// send: parent and name fields point at the tenant (or at the pool, tenant
// or token the method is about), and so do the names of the resource a
// Create or Update carries and the hello of a Subscribe. Deletes and
// updates name resources that do not exist, so the matrix changes little.
func SampleRequest(md protoreflect.MethodDescriptor, tenant, pool, node string) (proto.Message, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		return nil, err
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
				m.Set(fd, protoreflect.ValueOfString(node))
			case fd.Kind() == protoreflect.MessageKind && depth == 0 && fd.Message().ParentFile().Package() == APIPackage &&
				(fd.Message().Fields().ByName("name") != nil || fd.Message().Fields().ByName("parent") != nil):
				fill(m.Mutable(fd).Message(), depth+1)
			}
		}
	}
	fill(msg, 0)
	return msg.Interface(), nil
}

// Call makes one call of md, of any kind, with req as its (first) request
// message, and returns its status code.
func Call(ctx context.Context, conn *grpc.ClientConn, md protoreflect.MethodDescriptor, req proto.Message) codes.Code {
	method := FullMethod(md)
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
