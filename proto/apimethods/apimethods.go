// Package apimethods lists the gRPC methods of Beacon's IPAM API from the
// descriptors compiled into the binary, for the authorization tables that
// must cover every one of them (the gateway's and the IPAM's).
package apimethods

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	// The API's descriptors, registered in protoregistry.GlobalFiles.
	_ "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// APIPackage is the proto package of the IPAM's API.
const APIPackage = "beacon.ipam.v1"

// Methods returns every method of every service in APIPackage, in full
// name order, from the descriptors compiled into the binary.
func Methods() []protoreflect.MethodDescriptor {
	var out []protoreflect.MethodDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage(APIPackage, func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				out = append(out, sd.Methods().Get(j))
			}
		}
		return true
	})
	slices.SortFunc(out, func(a, b protoreflect.MethodDescriptor) int {
		return strings.Compare(FullMethod(a), FullMethod(b))
	})
	return out
}

// FullMethod returns the gRPC method name of md: "/package.Service/Method".
func FullMethod(md protoreflect.MethodDescriptor) string {
	return "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
}
