package server

import (
	"context"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/allocator"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// ConfigWriter is what the announcement config handlers need.
type ConfigWriter interface {
	CreateConfig(ctx context.Context, ref ipam.Ref, value any, stamp func(uid string, now time.Time), validateOnly bool, meta allocator.Meta) (allocator.ConfigResult, error)
	GetConfig(ctx context.Context, ref ipam.Ref) (allocator.ConfigResult, error)
	UpdateConfig(ctx context.Context, ref ipam.Ref, etagRev int64, next func(cur any, now time.Time) (any, error), validateOnly bool, meta allocator.Meta) (allocator.ConfigResult, error)
	DeleteConfig(ctx context.Context, ref ipam.Ref, etagRev int64, users ipam.Kind, inUse func(user any) bool, meta allocator.Meta) error
	CreateObjects(ctx context.Context, puts []ipam.Put, meta allocator.Meta) (allocator.ConfigResult, error)
	DeleteObjects(ctx context.Context, rev int64, refs ...ipam.Ref) error
}

// configMeta points at the identity and time fields of a config object.
type configMeta struct {
	tenant, id, uid  *string
	created, updated *time.Time
}

// configKind describes one kind of announcement config for the generic
// handlers: its storage kind, collection name, conversions and rules.
type configKind[P proto.Message, D any] struct {
	kind       ipam.Kind
	collection string // e.g. "l2Advertisements"
	field      string // the resource's field in requests, e.g. "l2_advertisement"
	updatable  []string
	from       func(fes *ipam.FieldErrors, prefix string, p P) D
	to         func(d D, rev int64) P
	// full renders every field, secrets included, for merging updates.
	full func(d D) P
	meta func(d D) configMeta
	// users is the kind whose objects may refer to this one; inUse says
	// whether one does.
	users ipam.Kind
	inUse func(id string) func(user any) bool
	// nameID, if set, replaces validID for the kind's IDs, and nameRule
	// idRule (nodes are named by their host names).
	nameID   func(string) bool
	nameRule string
}

// validID reports whether id is an ID of the kind, and the rule it breaks.
func (k *configKind[P, D]) validID(id string) (bool, string) {
	if k.nameID != nil {
		return k.nameID(id), k.nameRule
	}
	return validID(id), idRule
}

// withConditions sets the conditions field of a config resource, if it has
// one, from the planner's warnings about it: each warning becomes a
// condition of type "Ready" with status false.
func (s *Server) withConditions(m proto.Message, tenant, collection, id string) {
	if s.announced == nil {
		return
	}
	fd := m.ProtoReflect().Descriptor().Fields().ByName("conditions")
	if fd == nil {
		return
	}
	ws := s.announced.Warnings(tenant)[collection+"/"+id]
	if len(ws) == 0 {
		return
	}
	list := m.ProtoReflect().Mutable(fd).List()
	for _, w := range ws {
		c := &ipamv1.Condition{Type: "Ready", Status: false, Reason: w.Reason, Message: w.Message}
		list.Append(protoreflect.ValueOfMessage(c.ProtoReflect()))
	}
}

// parseName returns the tenant and ID of
// "tenants/{tenant}/{collection}/{id}".
func (k *configKind[P, D]) parseName(fes *ipam.FieldErrors, field, name string) (string, string) {
	rest, ok := strings.CutPrefix(name, "tenants/")
	t, id, ok2 := strings.Cut(rest, "/"+k.collection+"/")
	idOK, rule := k.validID(id)
	if !ok || !ok2 || !validTenant(t) || !idOK {
		fes.Add(field, "must be tenants/{tenant}/%s/{id}, where {id} %s", k.collection, rule)
		return "", ""
	}
	return t, id
}

func (k *configKind[P, D]) ref(tenant, id string) ipam.Ref {
	return ipam.Ref{Kind: k.kind, ID: tenant + "/" + id}
}

// stringField reads a string field of a message by name.
func stringField(m proto.Message, name string) string {
	fd := m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		return ""
	}
	return m.ProtoReflect().Get(fd).String()
}

func configCreate[P proto.Message, D any](ctx context.Context, s *Server, k *configKind[P, D], method, parent, id string, in P, requestID string, validateOnly bool, req proto.Message) (P, error) {
	var zero P
	var fes ipam.FieldErrors
	tenant := parseParent(&fes, "parent", parent, false)
	if ok, rule := k.validID(id); !ok {
		fes.Add(k.field+"_id", "%s", rule)
	}
	if !in.ProtoReflect().IsValid() {
		fes.Add(k.field, "is required")
	}
	d := k.from(&fes, k.field, in)
	validRequestID(&fes, "request_id", requestID)
	if err := fes.Err(); err != nil {
		return zero, toStatus(ctx, s.logger, method, err)
	}
	m := k.meta(d)
	*m.tenant, *m.id = tenant, id
	stamp := func(uid string, now time.Time) { *m.uid, *m.created, *m.updated = uid, now, now }
	res, err := s.w.CreateConfig(ctx, k.ref(tenant, id), d, stamp, validateOnly, meta(ctx, method, requestID, req))
	if err != nil {
		return zero, toStatus(ctx, s.logger, method, err)
	}
	return k.to(res.Value.(D), res.Rev), nil
}

func configGet[P proto.Message, D any](ctx context.Context, s *Server, k *configKind[P, D], method, name string) (P, error) {
	var zero P
	var fes ipam.FieldErrors
	tenant, id := k.parseName(&fes, "name", name)
	if err := fes.Err(); err != nil {
		return zero, toStatus(ctx, s.logger, method, err)
	}
	res, err := s.w.GetConfig(ctx, k.ref(tenant, id))
	if err != nil {
		return zero, toStatus(ctx, s.logger, method, err)
	}
	out := k.to(res.Value.(D), res.Rev)
	s.withConditions(out, tenant, k.collection, id)
	return out, nil
}

func configList[P proto.Message, D any](ctx context.Context, s *Server, k *configKind[P, D], method, parent string, size int32, token string) ([]P, string, error) {
	var fes ipam.FieldErrors
	tenant := parseParent(&fes, "parent", parent, true)
	n := pageSize(&fes, "page_size", size)
	q := queryHash(k.collection, parent)
	after := s.pages.decode(&fes, "page_token", token, q)
	if err := fes.Err(); err != nil {
		return nil, "", toStatus(ctx, s.logger, method, err)
	}
	prefix := tenant + "/"
	if tenant == "-" {
		prefix = ""
	}
	page, err := s.r.List(ctx, k.kind, prefix, after, n, 0)
	if err != nil {
		return nil, "", toStatus(ctx, s.logger, method, err)
	}
	out := make([]P, 0, len(page.Items))
	for _, ev := range page.Items {
		p := k.to(ev.Value.(D), ev.Rev)
		t, id, _ := strings.Cut(ev.Ref.ID, "/")
		s.withConditions(p, t, k.collection, id)
		out = append(out, p)
	}
	next := ""
	if page.More && len(page.Items) > 0 {
		next = s.pages.encode(page.Items[len(page.Items)-1].Ref.ID, q)
	}
	return out, next, nil
}

func configUpdate[P proto.Message, D any](ctx context.Context, s *Server, k *configKind[P, D], method string, in P, paths []string, requestID string, validateOnly bool, req proto.Message) (P, error) {
	var zero P
	var fes ipam.FieldErrors
	tenant, id := k.parseName(&fes, k.field+".name", stringField(in, "name"))
	etagRev := parseEtag(&fes, k.field+".etag", stringField(in, "etag"))
	validRequestID(&fes, "request_id", requestID)
	if len(paths) == 0 {
		fes.Add("update_mask", "must name at least one field (or \"*\")")
	}
	if err := fes.Err(); err != nil {
		return zero, toStatus(ctx, s.logger, method, err)
	}
	next := func(cur any, now time.Time) (any, error) {
		var fes ipam.FieldErrors
		merged := applyMask(&fes, k.full(cur.(D)), in, paths, k.updatable)
		d := k.from(&fes, k.field, merged)
		if err := fes.Err(); err != nil {
			return nil, err
		}
		old, m := k.meta(cur.(D)), k.meta(d)
		*m.tenant, *m.id, *m.uid, *m.created, *m.updated = *old.tenant, *old.id, *old.uid, *old.created, now
		return d, nil
	}
	res, err := s.w.UpdateConfig(ctx, k.ref(tenant, id), etagRev, next, validateOnly, meta(ctx, method, requestID, req))
	if err != nil {
		return zero, toStatus(ctx, s.logger, method, err)
	}
	return k.to(res.Value.(D), res.Rev), nil
}

func configDelete[P proto.Message, D any](ctx context.Context, s *Server, k *configKind[P, D], method, name, etagStr, requestID string, req proto.Message) error {
	var fes ipam.FieldErrors
	tenant, id := k.parseName(&fes, "name", name)
	etagRev := parseEtag(&fes, "etag", etagStr)
	validRequestID(&fes, "request_id", requestID)
	if err := fes.Err(); err != nil {
		return toStatus(ctx, s.logger, method, err)
	}
	var inUse func(any) bool
	if k.inUse != nil {
		inUse = k.inUse(id)
	}
	if err := s.w.DeleteConfig(ctx, k.ref(tenant, id), etagRev, k.users, inUse, meta(ctx, method, requestID, req)); err != nil {
		return toStatus(ctx, s.logger, method, err)
	}
	return nil
}
