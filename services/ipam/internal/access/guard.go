package access

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/beaconlb/beacon/pkg/spiffeid"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/proto/tenantscope"
)

// ActorKey is the metadata key in which the gateway names the user it
// calls for; the IPAM believes it from the gateway alone.
const ActorKey = "beacon-actor"

// Pools tells the guard which tenants a stored pool serves.
type Pools interface {
	// PoolTenants returns the tenants list of pool id; found is false if
	// there is no such pool.
	PoolTenants(ctx context.Context, id string) (tenants []string, found bool, err error)
}

// Tokens authenticates an announcer by a bearer token.
type Tokens interface {
	// AnnouncerOf returns the tenant and node the token speaks for, or an
	// error saying why not (logged, never sent to the caller).
	AnnouncerOf(ctx context.Context, token string) (tenant, node string, err error)
}

// Options configure a Guard.
type Options struct {
	// TrustDomain is the SPIFFE trust domain callers' IDs must be of.
	TrustDomain string
	// Insecure is set when callers present no certificate (no
	// --tls-client-ca): every caller is then an admin, and beacon-actor is
	// believed from anyone. For one machine and tests only.
	Insecure bool
	// Pools looks up the pools adapters change.
	Pools Pools
	// Tokens, when set, authenticates callers without a client
	// certificate by the bearer token they send (announcers in Kubernetes
	// with their ServiceAccount token).
	Tokens Tokens
	// StreamsPerCaller caps the streams one adapter or announcer may hold
	// open at once (default 16).
	StreamsPerCaller int
	Meter            metric.Meter
}

// Guard enforces Table on every call.
type Guard struct {
	opts    Options
	logger  *slog.Logger
	denied  metric.Int64Counter
	mu      sync.Mutex
	streams map[string]int
}

// New returns a Guard.
func New(opts Options, logger *slog.Logger) (*Guard, error) {
	if opts.StreamsPerCaller <= 0 {
		opts.StreamsPerCaller = 16
	}
	g := &Guard{opts: opts, logger: logger, streams: map[string]int{}}
	if opts.Meter != nil {
		c, err := opts.Meter.Int64Counter("beacon.ipam.access.denied",
			metric.WithDescription("Calls the IPAM refused to a caller: unauthenticated, not allowed for its role, or outside its tenant or node."))
		if err != nil {
			return nil, err
		}
		g.denied = c
	}
	return g, nil
}

type actorKey struct{}

// Actor returns who a call is for, as the guard established it: the
// gateway's user, or the caller's SPIFFE ID.
func Actor(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok {
		return a
	}
	return "anonymous"
}

// caller is an authenticated caller.
type caller struct {
	id    spiffeid.ID
	actor string
}

// errUnauthenticated is a caller without a valid identity.
var errUnauthenticated = errors.New("no valid client certificate identity")

// errNoCredential is a caller over TLS with no client certificate and no
// token.
var errNoCredential = fmt.Errorf("%w: no client certificate and no bearer token", errUnauthenticated)

// ErrTokenUnavailable is what Tokens wraps when it cannot check a token
// now (the caller is told UNAVAILABLE and retries).
var ErrTokenUnavailable = errors.New("access: the token could not be checked now")

// unauthenticatedText is what an unauthenticated caller is told.
const unauthenticatedText = "the IPAM needs a client certificate with a Beacon SPIFFE ID"

// identify establishes who calls, from the verified client certificate.
func (g *Guard) identify(ctx context.Context) (caller, error) {
	forwarded := func() string {
		if v := metadata.ValueFromIncomingContext(ctx, ActorKey); len(v) > 0 && v[0] != "" {
			return v[0]
		}
		return ""
	}
	if g.opts.Insecure {
		c := caller{id: spiffeid.ID{TrustDomain: g.opts.TrustDomain, Role: spiffeid.Admin, Name: "insecure"}, actor: forwarded()}
		if c.actor == "" {
			c.actor = "anonymous"
		}
		return c, nil
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return caller{}, errUnauthenticated
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return caller{}, errUnauthenticated
	}
	if len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return g.identifyToken(ctx)
	}
	id, err := spiffeid.FromCert(info.State.VerifiedChains[0][0], g.opts.TrustDomain)
	if err != nil {
		return caller{}, fmt.Errorf("%w: %w", errUnauthenticated, err)
	}
	c := caller{id: id, actor: id.String()}
	if id.Role == spiffeid.Gateway {
		if a := forwarded(); a != "" {
			c.actor = a
		}
	}
	return c, nil
}

// identifyToken establishes who calls without a client certificate over
// TLS, from the bearer token it sends: an announcer's.
func (g *Guard) identifyToken(ctx context.Context) (caller, error) {
	if g.opts.Tokens == nil {
		return caller{}, errNoCredential
	}
	v := metadata.ValueFromIncomingContext(ctx, "authorization")
	if len(v) == 0 {
		return caller{}, errNoCredential
	}
	if len(v) != 1 {
		return caller{}, fmt.Errorf("%w: %d authorization values", errUnauthenticated, len(v))
	}
	token, ok := strings.CutPrefix(v[0], "Bearer ")
	if !ok || token == "" {
		return caller{}, fmt.Errorf("%w: the authorization is not a bearer token", errUnauthenticated)
	}
	tenant, node, err := g.opts.Tokens.AnnouncerOf(ctx, token)
	if err != nil {
		return caller{}, err
	}
	id := spiffeid.ID{TrustDomain: g.opts.TrustDomain, Role: spiffeid.Announcer, Tenant: tenant, Name: node}
	if err := id.Validate(); err != nil {
		return caller{}, fmt.Errorf("%w: token: %w", errUnauthenticated, err)
	}
	return caller{id: id, actor: id.String()}, nil
}

// refuseUnidentified logs, counts and answers a caller identify refused.
func (g *Guard) refuseUnidentified(ctx context.Context, method string, err error) error {
	if errors.Is(err, ErrTokenUnavailable) {
		return g.refuse(ctx, caller{}, method, codes.Unavailable, "the IPAM cannot check the token now; retry", err)
	}
	return g.refuse(ctx, caller{}, method, codes.Unauthenticated, unauthenticatedText+" or an announcer's ServiceAccount token", err)
}

// accessOf returns what c may do with method.
func accessOf(c caller, method string) Access {
	if r, ok := table[method]; ok {
		return r.For(c.id.Role)
	}
	switch {
	case strings.HasPrefix(method, "/grpc.health.v1.Health/"):
		return Allow
	case c.id.Role == spiffeid.Gateway || c.id.Role == spiffeid.Admin:
		return Allow // reflection
	}
	return Deny
}

// refuse logs and counts a refusal and returns its status error; detail,
// if any, is logged and never sent to the caller.
func (g *Guard) refuse(ctx context.Context, c caller, method string, code codes.Code, why string, detail ...error) error {
	if g.denied != nil {
		g.denied.Add(ctx, 1, metric.WithAttributes(attribute.String("method", method), attribute.String("role", string(c.id.Role))))
	}
	who := c.id.String()
	if c.id.Role == "" {
		who = "unauthenticated"
	}
	attrs := []any{"caller", who, "method", method, "code", code.String(), "reason", why}
	if err := errors.Join(detail...); err != nil {
		attrs = append(attrs, "detail", err.Error())
	}
	g.logger.WarnContext(ctx, "call refused", attrs...)
	return status.Error(code, why)
}

// refuseCheck refuses a call that failed checkRequest or checkResponse.
func (g *Guard) refuseCheck(ctx context.Context, c caller, method string, err error) error {
	code, why := refusalOf(err)
	return g.refuse(ctx, c, method, code, why)
}

// refusalOf is the code and reason of a refusal of checkRequest or
// checkResponse: tenantscope's refusals (a response naming another
// tenant's resource is withheld without saying why), or a status.
func refusalOf(err error) (codes.Code, string) {
	var r *tenantscope.Refusal
	var leak *tenantscope.LeakError
	switch {
	case errors.As(err, &r):
		return codes.PermissionDenied, r.Error()
	case errors.Is(err, tenantscope.ErrUnknownFields):
		return codes.InvalidArgument, err.Error()
	case errors.As(err, &leak):
		return codes.Internal, "internal error"
	}
	return status.Code(err), status.Convert(err).Message()
}

// Unary returns the interceptor for unary calls.
func (g *Guard) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		c, err := g.identify(ctx)
		anonymous := err != nil && anonymous[info.FullMethod] && errors.Is(err, errNoCredential)
		if err != nil && !anonymous {
			return nil, g.refuseUnidentified(ctx, info.FullMethod, err)
		}
		if anonymous {
			c = caller{actor: "anonymous"}
		}
		ctx = context.WithValue(ctx, actorKey{}, c.actor)
		msg, _ := req.(proto.Message)
		acc := accessOf(c, info.FullMethod)
		if anonymous {
			acc = Allow
		}
		if err := g.checkRequest(ctx, c, acc, msg, true); err != nil {
			return nil, g.refuseCheck(ctx, c, info.FullMethod, err)
		}
		resp, err := handler(ctx, req)
		if err != nil || resp == nil {
			return resp, err
		}
		out, _ := resp.(proto.Message)
		if err := g.checkResponse(c, acc, out); err != nil {
			return nil, g.refuseCheck(ctx, c, info.FullMethod, err)
		}
		return resp, nil
	}
}

// Stream returns the interceptor for streams.
func (g *Guard) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		c, err := g.identify(ctx)
		if err != nil {
			return g.refuseUnidentified(ctx, info.FullMethod, err)
		}
		acc := accessOf(c, info.FullMethod)
		if acc == Deny {
			return g.refuse(ctx, c, info.FullMethod, codes.PermissionDenied, fmt.Sprintf("%s may not call %s", c.id.Role, info.FullMethod))
		}
		if c.id.Role != spiffeid.Gateway && c.id.Role != spiffeid.Admin {
			key := c.id.String()
			g.mu.Lock()
			n := g.streams[key]
			if n >= g.opts.StreamsPerCaller {
				g.mu.Unlock()
				return g.refuse(ctx, c, info.FullMethod, codes.ResourceExhausted, fmt.Sprintf("at most %d open streams per caller", g.opts.StreamsPerCaller))
			}
			g.streams[key] = n + 1
			g.mu.Unlock()
			defer func() {
				g.mu.Lock()
				if g.streams[key]--; g.streams[key] <= 0 {
					delete(g.streams, key)
				}
				g.mu.Unlock()
			}()
		}
		return handler(srv, &guardedStream{ServerStream: ss, g: g, c: c, acc: acc, method: info.FullMethod,
			ctx: context.WithValue(ctx, actorKey{}, c.actor)})
	}
}

// guardedStream checks every message a stream receives and sends.
type guardedStream struct {
	grpc.ServerStream
	g      *Guard
	c      caller
	acc    Access
	method string
	ctx    context.Context
	recvd  bool
}

func (s *guardedStream) Context() context.Context { return s.ctx }

func (s *guardedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	msg, _ := m.(proto.Message)
	first := !s.recvd
	s.recvd = true
	if err := s.g.checkRequest(s.ctx, s.c, s.acc, msg, first); err != nil {
		return s.g.refuseCheck(s.ctx, s.c, s.method, err)
	}
	return nil
}

func (s *guardedStream) SendMsg(m any) error {
	msg, ok := m.(proto.Message)
	if !ok && m != nil && (s.acc == Own || s.acc == OwnPools || s.acc == OwnPool) {
		// A message encoded beforehand (grpc.PreparedMsg) cannot be
		// checked: never sent where responses are.
		return status.Errorf(codes.Internal, "%s: a response the access guard cannot check", s.method)
	}
	if err := s.g.checkResponse(s.c, s.acc, msg); err != nil {
		return s.g.refuseCheck(s.ctx, s.c, s.method, err)
	}
	return s.ServerStream.SendMsg(m)
}

// checkRequest enforces acc on one request message.
func (g *Guard) checkRequest(ctx context.Context, c caller, acc Access, msg proto.Message, first bool) error {
	switch acc {
	case Allow:
		return nil
	case Own:
		if msg == nil {
			return status.Error(codes.PermissionDenied, "unexpected request")
		}
		return tenantscope.CheckRequest(msg.ProtoReflect(), c.id.Tenant, first)
	case OwnPools:
		if msg != nil {
			tenantscope.NarrowPoolRequest(msg.ProtoReflect(), c.id.Tenant)
		}
		return nil
	case OwnPool:
		return g.checkPoolWrite(ctx, c, msg)
	case OwnNode:
		req, ok := msg.(*ipamv1.SubscribeRequest)
		if !ok {
			return status.Error(codes.PermissionDenied, "unexpected request")
		}
		hello := req.GetHello()
		if hello == nil {
			if first {
				return status.Error(codes.PermissionDenied, "a session starts with a hello")
			}
			return nil
		}
		if hello.GetParent() != "tenants/"+c.id.Tenant || hello.GetNode() != c.id.Name {
			return status.Errorf(codes.PermissionDenied, "this announcer may subscribe only as node %q of tenants/%s", c.id.Name, c.id.Tenant)
		}
		return nil
	}
	return status.Errorf(codes.PermissionDenied, "%s may not call this method", c.id.Role)
}

// checkResponse enforces acc on one response message.
func (g *Guard) checkResponse(c caller, acc Access, msg proto.Message) error {
	if msg == nil {
		return nil
	}
	switch acc {
	case Own:
		return tenantscope.CheckResponse(msg.ProtoReflect(), c.id.Tenant)
	case OwnPools, OwnPool:
		_, err := tenantscope.FilterPoolResponse(msg.ProtoReflect(), c.id.Tenant)
		return err
	}
	return nil
}

// checkPoolWrite enforces OwnPool: the pool, before and after, serves the
// caller's tenant alone.
func (g *Guard) checkPoolWrite(ctx context.Context, c caller, msg proto.Message) error {
	only := []string{c.id.Tenant}
	existing := func(name string) error {
		id, ok := strings.CutPrefix(name, "pools/")
		if !ok || g.opts.Pools == nil {
			return status.Errorf(codes.PermissionDenied, "%q is not a pool this adapter may change", name)
		}
		ts, found, err := g.opts.Pools.PoolTenants(ctx, id)
		if err != nil {
			return status.Error(codes.Unavailable, "cannot read the pool's tenants; retry")
		}
		if found && !slices.Equal(ts, only) {
			return status.Errorf(codes.PermissionDenied, "pool %q serves other tenants than %q: only an admin may change it", name, c.id.Tenant)
		}
		return nil
	}
	switch req := msg.(type) {
	case *ipamv1.CreatePoolRequest:
		if !slices.Equal(req.GetPool().GetTenants(), only) {
			return status.Errorf(codes.PermissionDenied, "an adapter creates only pools whose tenants are exactly [%q]", c.id.Tenant)
		}
		return nil
	case *ipamv1.UpdatePoolRequest:
		paths := req.GetUpdateMask().GetPaths()
		if (len(paths) == 0 || slices.Contains(paths, "tenants") || slices.Contains(paths, "*")) && !slices.Equal(req.GetPool().GetTenants(), only) {
			return status.Errorf(codes.PermissionDenied, "an adapter keeps its pools' tenants exactly [%q]", c.id.Tenant)
		}
		return existing(req.GetPool().GetName())
	case *ipamv1.DeletePoolRequest:
		return existing(req.GetName())
	}
	return status.Error(codes.PermissionDenied, "unexpected request")
}
