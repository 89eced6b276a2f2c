package tenantscope_test

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protopath"
	"google.golang.org/protobuf/reflect/protorange"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/beaconlb/beacon/proto/beacon/ipam/v1" // registers the API's descriptors

	"github.com/beaconlb/beacon/proto/tenantscope"
)

// nameValue is a non-empty name or parent value found in a message, with
// its depth (0 for the message's own fields).
type nameValue struct {
	value string
	depth int
}

// names lists every non-empty string value of a field called "name" or
// "parent" in m, at any depth, walking the message with protorange (not
// with the code under test).
func names(t *testing.T, m protoreflect.Message) []nameValue {
	t.Helper()
	var out []nameValue
	err := protorange.Range(m, func(p protopath.Values) error {
		last := p.Index(-1)
		var fd protoreflect.FieldDescriptor
		switch last.Step.Kind() {
		case protopath.FieldAccessStep:
			fd = last.Step.FieldDescriptor()
			if fd.IsList() || fd.IsMap() {
				return nil // the elements come next
			}
		case protopath.ListIndexStep:
			fd = p.Index(-2).Step.FieldDescriptor()
		default:
			return nil
		}
		if fd.Kind() != protoreflect.StringKind || fd.Name() != "name" && fd.Name() != "parent" {
			return nil
		}
		if s := last.Value.String(); s != "" {
			depth := -1
			for _, st := range p.Path {
				if st.Kind() == protopath.FieldAccessStep {
					depth++
				}
			}
			out = append(out, nameValue{s, depth})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// apiMethods lists every method of the API's services (package
// beacon.ipam.v1) in a fixed order: the fuzz input picks one by index.
func apiMethods() []protoreflect.MethodDescriptor {
	var out []protoreflect.MethodDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("beacon.ipam.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				out = append(out, sd.Methods().Get(j))
			}
		}
		return true
	})
	slices.SortFunc(out, func(a, b protoreflect.MethodDescriptor) int {
		return strings.Compare(string(a.FullName()), string(b.FullName()))
	})
	return out
}

// FuzzCheckRequest decodes arbitrary wire bytes as the request (or the
// response) of any method of the API and checks the one-tenant rule:
// CheckRequest refuses with PermissionDenied or InvalidArgument
// only, and what it lets through for tenant c1 names no other tenant's
// resource at any depth (every name or parent is tenants/c1 or under it,
// or, below the top level, a plain word without '/'), and names one of
// c1's resources when it is the first message of a call. CheckResponse lets
// through no name under tenants/ that is not c1's.
func FuzzCheckRequest(f *testing.F) {
	methods := apiMethods()
	const tenant = "c1"
	owns := func(v string) bool { return v == "tenants/"+tenant || strings.HasPrefix(v, "tenants/"+tenant+"/") }
	f.Fuzz(func(t *testing.T, method uint16, response, first bool, b []byte) {
		md := methods[int(method)%len(methods)]
		desc := md.Input()
		if response {
			desc = md.Output()
		}
		mt, err := protoregistry.GlobalTypes.FindMessageByName(desc.FullName())
		if err != nil {
			t.Fatal(err)
		}
		m := mt.New()
		if proto.Unmarshal(b, m.Interface()) != nil {
			return
		}
		if response {
			if err := tenantscope.CheckResponse(m, tenant); err != nil {
				if kind(err) != leaked {
					t.Fatalf("%s response: CheckResponse error %v, want a LeakError", md.FullName(), err)
				}
				return
			}
			for _, n := range names(t, m) {
				if strings.HasPrefix(n.value, "tenants/") && !owns(n.value) {
					t.Fatalf("%s response: CheckResponse let through %q", md.FullName(), n.value)
				}
			}
			return
		}
		err = tenantscope.CheckRequest(m, tenant, first)
		if err != nil {
			if k := kind(err); k != refused && k != unknownFields {
				t.Fatalf("%s: CheckRequest error %v, want a Refusal or ErrUnknownFields", md.FullName(), err)
			}
			return
		}
		matched := false
		for _, n := range names(t, m) {
			switch {
			case owns(n.value):
				matched = true
			case n.depth > 0 && !strings.Contains(n.value, "/"):
			default:
				t.Fatalf("%s: CheckRequest let through %q at depth %d", md.FullName(), n.value, n.depth)
			}
		}
		if first && !matched {
			t.Fatalf("%s: CheckRequest let through a first message naming nothing of %s", md.FullName(), tenant)
		}
	})
}
