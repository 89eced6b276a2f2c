// Package tenantscope owns the rule that a caller acting for one tenant
// names only that tenant's resources: it checks decoded request and
// response messages of the IPAM's API, and narrows pool listings to the
// pools a tenant may draw from. The gateway applies it to every tenant
// caller; the IPAM applies it to adapters.
package tenantscope

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// Resource names live in string fields called "name" or "parent", at any
// depth of a message ("parent", "allocation.name", "hello.parent").
func isNameField(fd protoreflect.FieldDescriptor) bool {
	return fd.Kind() == protoreflect.StringKind && !fd.IsMap() && (fd.Name() == "name" || fd.Name() == "parent")
}

// walkNames calls fn for every non-empty name or parent value in m, with
// its field path and depth (0 for m's own fields).
func walkNames(m protoreflect.Message, path string, depth int, fn func(path, value string, depth int) error) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := string(fd.Name())
		if path != "" {
			p = path + "." + p
		}
		switch {
		case isNameField(fd) && fd.IsList():
			l := v.List()
			for i := range l.Len() {
				if s := l.Get(i).String(); s != "" {
					if err = fn(fmt.Sprintf("%s[%d]", p, i), s, depth); err != nil {
						return false
					}
				}
			}
		case isNameField(fd):
			if s := v.String(); s != "" {
				err = fn(p, s, depth)
			}
		case fd.IsMap() && fd.MapValue().Kind() == protoreflect.MessageKind:
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				err = walkNames(mv.Message(), fmt.Sprintf("%s[%v]", p, k.Interface()), depth+1, fn)
				return err == nil
			})
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			l := v.List()
			for i := range l.Len() {
				if err = walkNames(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i), depth+1, fn); err != nil {
					return false
				}
			}
		case !fd.IsList() && !fd.IsMap() && fd.Kind() == protoreflect.MessageKind:
			err = walkNames(v.Message(), p, depth+1, fn)
		}
		return err == nil
	})
	return err
}

// ownsName reports whether a resource name is tenant's: "tenants/T" or
// "tenants/T/...".
func ownsName(tenant, name string) bool {
	own := "tenants/" + tenant
	return name == own || strings.HasPrefix(name, own+"/")
}

// CheckRequest checks one decoded request message of a caller
// acting for tenant. Every resource name must be the tenant's: a name or
// parent value must be "tenants/{tenant}" or start with
// "tenants/{tenant}/". Below the top level, a value without '/' is not a
// resource name (an interface "eth0", a community alias) and is let
// through. "tenants/-" (every tenant) is refused like any other tenant's
// name. The first message of a call (the only one of a unary call, the
// hello of a Subscribe) must also name at least one of the tenant's
// resources, so that nothing reaches the IPAM unscoped. Refusals are
// *Refusal; a request with fields unknown to the server (which could hide
// a resource name) is ErrUnknownFields.
func CheckRequest(m protoreflect.Message, tenant string, first bool) error {
	if hasUnknown(m) {
		return ErrUnknownFields
	}
	matched := false
	err := walkNames(m, "", 0, func(path, v string, depth int) error {
		switch {
		case ownsName(tenant, v):
			matched = true
			return nil
		case depth > 0 && !strings.Contains(v, "/"):
			return nil
		default:
			return refusef("%s: %q is not a resource of tenants/%s", path, v, tenant)
		}
	})
	if err != nil {
		return err
	}
	if first && !matched {
		return refusef("the request must name tenants/%s or one of its resources", tenant)
	}
	return nil
}

// CheckResponse checks a response message: any name or parent
// under "tenants/" must be the tenant's. The IPAM scopes every answer to
// the request's tenant, so a failure here (a *LeakError) is a bug
// upstream; it is refused rather than shown.
func CheckResponse(m protoreflect.Message, tenant string) error {
	return walkNames(m, "", 0, func(path, v string, _ int) error {
		if strings.HasPrefix(v, "tenants/") && !ownsName(tenant, v) {
			return &LeakError{Path: path}
		}
		return nil
	})
}

// NarrowPoolRequest narrows a pool request to the tenant's pools: a "filter" field gets
// the term `tenant = "{tenant}"` added, so that the IPAM lists only pools
// the tenant may draw from. It reports whether m changed.
func NarrowPoolRequest(m protoreflect.Message, tenant string) bool {
	fd := m.Descriptor().Fields().ByName("filter")
	if fd == nil || fd.Kind() != protoreflect.StringKind || fd.IsList() {
		return false
	}
	term := fmt.Sprintf("tenant = %q", tenant)
	f := strings.TrimSpace(m.Get(fd).String())
	if f != "" {
		term = f + " AND " + term
	}
	m.Set(fd, protoreflect.ValueOfString(term))
	return true
}

var poolName = (&ipamv1.Pool{}).ProtoReflect().Descriptor().FullName()

// FilterPoolResponse narrows a pool response to the tenant's pools: top-level Pool fields
// the tenant may not draw from are removed from lists, and a single one is
// refused (*Refusal). Pools shown keep only the caller's tenant
// in their tenants list, so no tenant learns the names of others. It
// reports whether m changed.
func FilterPoolResponse(m protoreflect.Message, tenant string) (bool, error) {
	changed := false
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind || fd.Message().FullName() != poolName || fd.IsMap() {
			return true
		}
		if !fd.IsList() {
			p := v.Message()
			if !poolAllows(p, tenant) {
				name := p.Get(p.Descriptor().Fields().ByName("name")).String()
				err = refusef("%s does not exist or tenants/%s may not use it", name, tenant)
				return false
			}
			changed = redactTenants(p, tenant) || changed
			return true
		}
		l := v.List()
		kept := 0
		for i := range l.Len() {
			p := l.Get(i).Message()
			if !poolAllows(p, tenant) {
				changed = true
				continue
			}
			changed = redactTenants(p, tenant) || changed
			l.Set(kept, l.Get(i))
			kept++
		}
		l.Truncate(kept)
		return true
	})
	return changed, err
}

func poolTenants(p protoreflect.Message) protoreflect.List {
	return p.Get(p.Descriptor().Fields().ByName("tenants")).List()
}

// poolAllows reports whether tenant may draw from a pool: its tenants
// list is empty or names the tenant.
func poolAllows(p protoreflect.Message, tenant string) bool {
	ts := poolTenants(p)
	if ts.Len() == 0 {
		return true
	}
	for i := range ts.Len() {
		if ts.Get(i).String() == tenant {
			return true
		}
	}
	return false
}

func redactTenants(p protoreflect.Message, tenant string) bool {
	if poolTenants(p).Len() <= 1 {
		return false
	}
	fd := p.Descriptor().Fields().ByName("tenants")
	l := p.NewField(fd).List()
	l.Append(protoreflect.ValueOfString(tenant))
	p.Set(fd, protoreflect.ValueOfList(l))
	return true
}

// hasUnknown reports whether m or any message inside it carries fields
// this copy of the API does not know. Such a field could be a
// resource name the checks cannot see, so scoped requests with one are
// refused.
func hasUnknown(m protoreflect.Message) bool {
	if len(m.GetUnknown()) > 0 {
		return true
	}
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap() && fd.MapValue().Kind() == protoreflect.MessageKind:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				found = hasUnknown(mv.Message())
				return !found
			})
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			for i := range v.List().Len() {
				if found = hasUnknown(v.List().Get(i).Message()); found {
					break
				}
			}
		case !fd.IsList() && !fd.IsMap() && fd.Kind() == protoreflect.MessageKind:
			found = hasUnknown(v.Message())
		}
		return !found
	})
	return found
}
