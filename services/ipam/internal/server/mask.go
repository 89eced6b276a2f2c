package server

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// applyMask copies the top-level fields named by paths from src into a
// clone of dst and returns it; "*" means every updatable field. A path that
// is not updatable is a field error on update_mask.paths[i].
func applyMask[P proto.Message](fes *ipam.FieldErrors, dst, src P, paths []string, updatable []string) P {
	out := proto.Clone(dst).(P)
	if len(paths) == 0 {
		fes.Add("update_mask", "must name at least one field (or \"*\")")
		return out
	}
	if slices.Contains(paths, "*") {
		paths = updatable
	}
	om, sm := out.ProtoReflect(), src.ProtoReflect()
	for i, p := range paths {
		fd := om.Descriptor().Fields().ByName(protoreflect.Name(p))
		if fd == nil || !slices.Contains(updatable, p) {
			fes.Add(fmt.Sprintf("update_mask.paths[%d]", i), "%q cannot be updated; updatable: %v", p, updatable)
			continue
		}
		if sm.Has(fd) {
			om.Set(fd, sm.Get(fd))
		} else {
			om.Clear(fd)
		}
	}
	return out
}
