// Package proxy is the gateway's gRPC core: one generic handler
// (grpc.UnknownServiceHandler) that serves every method of the IPAM's API,
// present and future, with one code path. For each call it authenticates
// the caller, looks the method up in the authorization table, applies the
// rate limit, checks the tenant scope of the request (decoding a copy with
// the generated types found through protoregistry), forwards the raw
// frames to a healthy IPAM replica with the caller's identity as the
// beacon-actor metadata, and checks or filters what comes back.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/beaconlb/beacon/proto/apimethods"
	"github.com/beaconlb/beacon/proto/tenantscope"
	"github.com/beaconlb/beacon/services/gateway/internal/auth"
	"github.com/beaconlb/beacon/services/gateway/internal/fault"
	"github.com/beaconlb/beacon/services/gateway/internal/limit"
	"github.com/beaconlb/beacon/services/gateway/internal/policy"
)

// ActorKey is the metadata key on which the IPAM expects the authenticated
// caller (services/ipam/internal/server.ActorKey). The gateway sets it on
// every forwarded call and drops any value a client sent.
const ActorKey = "beacon-actor"

// Config is what a Proxy needs.
type Config struct {
	// Backend is the connection to the IPAM replicas (DialIPAM).
	Backend grpc.ClientConnInterface
	// Auth decides who a caller is.
	Auth *auth.Authenticator
	// Policy is the authorization table (method → access per role); nil:
	// policy.Table().
	Policy map[string]policy.Rule
	// Limiter rate-limits callers; nil: no limit.
	Limiter *limit.Limiter
	// AuthFailures limits failed authentications per client network; nil:
	// no limit.
	AuthFailures *limit.Failures
	// RefusalHold is about how long a call refused by the rate limit is
	// held before the refusal is sent (from half to one and a half times
	// it; the RetryInfo delay counts from the send); 0 sends it at once.
	RefusalHold time.Duration
	// MaxUnaryTimeout caps the deadline of unary calls (a caller's shorter
	// deadline stands); streams have none. 0: no cap.
	MaxUnaryTimeout time.Duration
	// ResumeWindow is how long a resumable server stream (one whose
	// request and responses carry resume_token, such as WatchAllocations)
	// keeps being reopened after the replica serving it failed, until some
	// replica takes it (default 15s).
	ResumeWindow time.Duration
	// Meter creates the proxy's metrics; nil: none.
	Meter metric.Meter
	// Logger logs refusals (debug) and failovers (info).
	Logger *slog.Logger
}

// Proxy serves the API by forwarding to the IPAM. Create it with New.
type Proxy struct {
	cfg     Config
	methods map[string]*method
	logger  *slog.Logger

	authFailures metric.Int64Counter
	denied       metric.Int64Counter
	limited      metric.Int64Counter
	resumes      metric.Int64Counter
	retries      metric.Int64Counter

	// drained is done once Drain was called: streams end.
	drained context.Context
	drain   context.CancelFunc
}

// method is what the proxy knows about one method of the API.
type method struct {
	name                         string
	input, output                protoreflect.MessageType
	clientStreams, serverStreams bool
	rule                         policy.Rule
	// For resumable server streams: the request's and the responses'
	// resume_token fields.
	resumeIn, resumeOut protoreflect.FieldDescriptor
}

// New returns a Proxy for every method of apimethods.APIPackage.
func New(cfg Config) (*Proxy, error) {
	if cfg.Backend == nil || cfg.Auth == nil {
		return nil, errors.New("proxy: Backend and Auth are required")
	}
	if cfg.ResumeWindow <= 0 {
		cfg.ResumeWindow = 15 * time.Second
	}
	if cfg.Meter == nil {
		cfg.Meter = noop.NewMeterProvider().Meter("")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Policy == nil {
		cfg.Policy = policy.Table()
	}
	p := &Proxy{cfg: cfg, methods: map[string]*method{}, logger: cfg.Logger}
	p.drained, p.drain = context.WithCancel(context.Background())
	for _, md := range apimethods.Methods() {
		in, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
		if err != nil {
			return nil, err
		}
		out, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
		if err != nil {
			return nil, err
		}
		name := apimethods.FullMethod(md)
		rule := cfg.Policy[name] // no row: the zero Rule denies everyone
		m := &method{name: name, input: in, output: out, clientStreams: md.IsStreamingClient(), serverStreams: md.IsStreamingServer(), rule: rule}
		if m.serverStreams && !m.clientStreams {
			ri, ro := in.Descriptor().Fields().ByName("resume_token"), out.Descriptor().Fields().ByName("resume_token")
			if ri != nil && ro != nil && ri.Kind() == protoreflect.StringKind && ro.Kind() == protoreflect.StringKind && !ri.IsList() && !ro.IsList() {
				m.resumeIn, m.resumeOut = ri, ro
			}
		}
		p.methods[name] = m
	}
	var err error
	mt := cfg.Meter
	if p.authFailures, err = mt.Int64Counter("beacon_gateway_auth_failures", metric.WithDescription("Calls refused because the caller could not be authenticated.")); err != nil {
		return nil, err
	}
	if p.denied, err = mt.Int64Counter("beacon_gateway_denied", metric.WithDescription("Calls refused by the authorization table or the tenant scope checks, by role.")); err != nil {
		return nil, err
	}
	if p.limited, err = mt.Int64Counter("beacon_gateway_rate_limited", metric.WithDescription("Calls refused by the rate limit, by role.")); err != nil {
		return nil, err
	}
	if p.retries, err = mt.Int64Counter("beacon_gateway_unary_retries", metric.WithDescription("Unary calls sent again to another IPAM replica after the first answered UNAVAILABLE (reads, and writes with a request_id).")); err != nil {
		return nil, err
	}
	if p.resumes, err = mt.Int64Counter("beacon_gateway_stream_resumes", metric.WithDescription("Server streams reopened on another IPAM replica after the serving one failed.")); err != nil {
		return nil, err
	}
	return p, nil
}

// Drain ends every stream being proxied, and every one opened later, with
// UNAVAILABLE, so that their clients reconnect to another gateway; unary
// calls are not affected. Call it when shutting down.
func (p *Proxy) Drain() { p.drain() }

// Handler returns the stream handler to install with
// grpc.UnknownServiceHandler. forwarded says where client certificates
// come from (auth.CredentialsFromContext): false for the TLS listener,
// true only for the in-process server behind the REST edge.
func (p *Proxy) Handler(forwarded bool) grpc.StreamHandler {
	return func(_ any, ss grpc.ServerStream) error { return p.serve(ss, forwarded) }
}

// serve handles one call and turns how it ended into the status its caller
// sees (fault.Status, the gateway's one mapping), counting the refusals
// of the tenant scope.
func (p *Proxy) serve(ss grpc.ServerStream, forwarded bool) error {
	ctx := ss.Context()
	name, _ := grpc.MethodFromServerStream(ss)
	c, err := p.handle(ctx, ss, name, forwarded)
	st := fault.Status(ctx, p.logger, name, err)
	if c != nil && c.refused && status.Code(st) == codes.PermissionDenied {
		p.denied.Add(ctx, 1, metric.WithAttributes(attribute.String("role", auth.RoleName(c.id.Role))))
		p.logger.DebugContext(ctx, "call denied", "method", name, "actor", c.id.Actor, "error", err)
	}
	return st
}

// handle handles one call; the call is nil if the caller was refused
// before its request was looked at.
func (p *Proxy) handle(ctx context.Context, ss grpc.ServerStream, name string, forwarded bool) (*call, error) {
	m := p.methods[name]
	if m == nil {
		return nil, &fault.UnknownMethodError{Method: name}
	}
	creds := auth.CredentialsFromContext(ctx, forwarded)
	if wait := p.cfg.AuthFailures.Blocked(creds.Addr); wait > 0 && !p.cfg.Auth.Decidable(creds) {
		// This network failed too often: do not let it make the IPAM
		// verify more unknown tokens.
		p.authFailures.Add(ctx, 1)
		return nil, p.cfg.AuthFailures.Refuse(wait)
	}
	id, err := p.cfg.Auth.Authenticate(ctx, creds)
	if err != nil {
		p.authFailures.Add(ctx, 1)
		if !errors.Is(err, fault.ErrTokenUnverifiable) {
			p.cfg.AuthFailures.Failed(creds.Addr)
		}
		return nil, err
	}
	role := auth.RoleName(id.Role)
	access := m.rule.For(id.Role)
	if access == policy.Deny {
		p.denied.Add(ctx, 1, metric.WithAttributes(attribute.String("role", role)))
		p.logger.DebugContext(ctx, "call denied", "method", name, "actor", id.Actor)
		return nil, &fault.DeniedError{Role: role, Method: name}
	}
	if wait := p.cfg.Limiter.Allow(role, id.Tenant); wait > 0 {
		p.limited.Add(ctx, 1, metric.WithAttributes(attribute.String("role", role)))
		// Hold the refusal a moment: a client that retries at once
		// (ignoring RetryInfo) then floods at a few calls per second per
		// stream instead of as fast as the gateway can refuse, which keeps
		// the CPU for the other tenants.
		// Jittered (½ to 1½ times RefusalHold), so that the held calls of
		// one flooding client do not all come back at once.
		hold := p.cfg.RefusalHold
		if hold > 0 {
			hold = hold/2 + rand.N(hold)
			t := time.NewTimer(hold)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
		return nil, p.cfg.Limiter.Refuse(role, id.Tenant, max(0, wait-hold))
	}
	c := &call{p: p, m: m, id: id, access: access, ss: ss}
	streaming := m.clientStreams || m.serverStreams
	if streaming {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(p.drained, cancel)()
	}
	ctx = outgoing(ctx, id)
	switch {
	case !m.clientStreams && !m.serverStreams:
		err = c.unary(ctx)
	case !m.clientStreams:
		err = c.serverStream(ctx)
	default:
		err = c.clientStream(ctx)
	}
	if streaming && err != nil && p.drained.Err() != nil {
		return c, fault.ErrShuttingDown
	}
	return c, err
}

// droppedMetadata are incoming keys never forwarded: credentials, the
// identity (set anew), transport and trace headers (otelgrpc injects the
// gateway's own span).
var droppedMetadata = map[string]bool{
	"authorization": true, "proxy-authorization": true, "cookie": true,
	auth.ForwardedCertKey: true, ActorKey: true,
	"content-type": true, "user-agent": true, "te": true, "host": true, "connection": true, "keep-alive": true,
	"traceparent": true, "tracestate": true, "baggage": true,
}

// outgoing returns ctx with the metadata to send to the IPAM: the
// caller's, less droppedMetadata and reserved keys, plus beacon-actor.
func outgoing(ctx context.Context, id auth.Identity) context.Context {
	in, _ := metadata.FromIncomingContext(ctx)
	out := make(metadata.MD, len(in)+1)
	for k, v := range in {
		if droppedMetadata[k] || strings.HasPrefix(k, "grpc-") || strings.HasPrefix(k, ":") {
			continue
		}
		out[k] = v
	}
	out.Set(ActorKey, id.Actor)
	return metadata.NewOutgoingContext(ctx, out)
}

// fromBackend returns the IPAM's header or trailer metadata less reserved
// keys: gRPC writes grpc-status, grpc-message and grpc-status-details-bin
// itself from the status the handler returns.
func fromBackend(md metadata.MD) metadata.MD {
	out := make(metadata.MD, len(md))
	for k, v := range md {
		if !strings.HasPrefix(k, "grpc-") && !strings.HasPrefix(k, ":") && k != "content-type" {
			out[k] = v
		}
	}
	return out
}

// call is one call being proxied.
type call struct {
	p      *Proxy
	m      *method
	id     auth.Identity
	access policy.Access
	ss     grpc.ServerStream
	// refused is set when the scope checks refused the call.
	refused bool
}

// checkRequest applies the tenant scope to one request frame; for
// OwnPools it may rewrite the frame.
func (c *call) checkRequest(f *Frame, first bool) error {
	if c.access != policy.Own && c.access != policy.OwnPools {
		return nil
	}
	msg := c.m.input.New()
	if err := proto.Unmarshal(f.Data, msg.Interface()); err != nil {
		return &fault.UndecodableError{Method: c.m.name, Cause: err}
	}
	if c.access == policy.Own {
		err := tenantscope.CheckRequest(msg, c.id.Tenant, first)
		c.refused = err != nil
		return err
	}
	if tenantscope.NarrowPoolRequest(msg, c.id.Tenant) {
		b, err := proto.Marshal(msg.Interface())
		if err != nil {
			return fmt.Errorf("re-encode the request: %w", err)
		}
		f.Data = b
	}
	return nil
}

// checkResponse applies the tenant scope to one response frame; for
// OwnPools it may rewrite the frame. decoded, if not nil, is the frame
// already decoded.
func (c *call) checkResponse(f *Frame, decoded protoreflect.Message) error {
	if c.access != policy.Own && c.access != policy.OwnPools {
		return nil
	}
	msg := decoded
	if msg == nil {
		msg = c.m.output.New()
		if err := proto.Unmarshal(f.Data, msg.Interface()); err != nil {
			return fmt.Errorf("decode the response: %w", err)
		}
	}
	if c.access == policy.Own {
		// A *tenantscope.LeakError: fault.Status logs it and tells the
		// caller nothing of it.
		return tenantscope.CheckResponse(msg, c.id.Tenant)
	}
	changed, err := tenantscope.FilterPoolResponse(msg, c.id.Tenant)
	if err != nil {
		c.refused = true
		return err
	}
	if changed {
		b, err := proto.Marshal(msg.Interface())
		if err != nil {
			return fmt.Errorf("re-encode the response: %w", err)
		}
		f.Data = b
	}
	return nil
}

// backendError adapts an error of the IPAM to the caller. For OwnPools, a
// missing pool reads like one the tenant may not use, so that tenants
// cannot probe for pool names.
func (c *call) backendError(err error) error {
	if c.access == policy.OwnPools && status.Code(err) == codes.NotFound {
		c.refused = true
		return &fault.ScopeError{Reason: fmt.Sprintf("the pool does not exist or tenants/%s may not use it", c.id.Tenant)}
	}
	return err
}

func (c *call) unary(ctx context.Context) error {
	var in Frame
	if err := c.ss.RecvMsg(&in); err != nil {
		return err
	}
	if err := c.checkRequest(&in, true); err != nil {
		return err
	}
	if c.p.cfg.MaxUnaryTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.p.cfg.MaxUnaryTimeout)
		defer cancel()
	}
	var out Frame
	var header, trailer metadata.MD
	err := c.p.cfg.Backend.Invoke(ctx, c.m.name, &in, &out, grpc.Header(&header), grpc.Trailer(&trailer))
	if status.Code(err) == codes.Unavailable && c.retryable(&in) {
		// The replica died under the call, or lost etcd: once more, after a
		// moment, on whichever replica the balancer picks now. Safe for a
		// read, and for a write with a request_id (a second commit returns
		// the first's result).
		t := time.NewTimer(unaryRetryDelay)
		select {
		case <-ctx.Done():
		case <-t.C:
			c.p.retries.Add(ctx, 1)
			out, header, trailer = Frame{}, nil, nil
			err = c.p.cfg.Backend.Invoke(ctx, c.m.name, &in, &out, grpc.Header(&header), grpc.Trailer(&trailer))
		}
		t.Stop()
	}
	if h := fromBackend(header); len(h) > 0 {
		_ = c.ss.SetHeader(h)
	}
	if t := fromBackend(trailer); len(t) > 0 {
		c.ss.SetTrailer(t)
	}
	if err != nil {
		return c.backendError(err)
	}
	if err := c.checkResponse(&out, nil); err != nil {
		return err
	}
	return c.ss.SendMsg(&out)
}

// unaryRetryDelay is how long a unary call that met an unavailable replica
// waits before it is sent again.
const unaryRetryDelay = 100 * time.Millisecond

// retryable reports whether a unary request may be sent twice: a read (Get
// and List methods, VerifyToken), or a request carrying a request_id.
func (c *call) retryable(in *Frame) bool {
	short := c.m.name[strings.LastIndex(c.m.name, "/")+1:]
	if strings.HasPrefix(short, "Get") || strings.HasPrefix(short, "List") || short == "VerifyToken" {
		return true
	}
	fd := c.m.input.Descriptor().Fields().ByName("request_id")
	if fd == nil {
		return false
	}
	msg := c.m.input.New()
	if err := proto.Unmarshal(in.Data, msg.Interface()); err != nil {
		return false
	}
	return msg.Get(fd).String() != ""
}

// serverStream proxies a call with one request and a stream of responses.
// If the method is resumable and the replica serving it fails, the stream
// is reopened (on a healthy replica: the balancer no longer picks the
// failed one) after the last resume_token the caller received, so the
// caller sees one unbroken stream; it keeps trying for ResumeWindow. Without
// a token to resume from after messages were already forwarded (in the
// middle of a snapshot), the failure is returned: the caller must start
// again.
func (c *call) serverStream(ctx context.Context) error {
	var in Frame
	if err := c.ss.RecvMsg(&in); err != nil {
		return err
	}
	if err := c.checkRequest(&in, true); err != nil {
		return err
	}
	resumable := c.m.resumeIn != nil
	var (
		lastToken  string
		forwarded  bool
		headerSent bool
		failures   int
		failedAt   time.Time
	)
	desc := &grpc.StreamDesc{ServerStreams: true}
	for {
		err := func() error {
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			cs, err := c.p.cfg.Backend.NewStream(sctx, desc, c.m.name)
			if err != nil {
				return err
			}
			if err := cs.SendMsg(&in); err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if err := cs.CloseSend(); err != nil {
				return err
			}
			if h, err := cs.Header(); err == nil {
				failures, failedAt = 0, time.Time{} // a replica took the stream
				if !headerSent {
					headerSent = true
					if h = fromBackend(h); len(h) > 0 {
						_ = c.ss.SendHeader(h)
					}
				}
			}
			for {
				var out Frame
				if err := cs.RecvMsg(&out); err != nil {
					c.ss.SetTrailer(fromBackend(cs.Trailer()))
					return err
				}
				var decoded protoreflect.Message
				if resumable {
					decoded = c.m.output.New()
					if err := proto.Unmarshal(out.Data, decoded.Interface()); err != nil {
						return fmt.Errorf("decode the response: %w", err)
					}
					if t := decoded.Get(c.m.resumeOut).String(); t != "" {
						lastToken = t
					}
				}
				if err := c.checkResponse(&out, decoded); err != nil {
					return err
				}
				if err := c.ss.SendMsg(&out); err != nil {
					return errCallerGone{err}
				}
				forwarded = true
			}
		}()
		var gone errCallerGone
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.As(err, &gone):
			return gone.err
		case !resumable || status.Code(err) != codes.Unavailable || ctx.Err() != nil:
			return c.backendError(err)
		case forwarded && lastToken == "":
			return err
		}
		failures++
		if failedAt.IsZero() {
			failedAt = time.Now()
		} else if time.Since(failedAt) > c.p.cfg.ResumeWindow {
			return err
		}
		if lastToken != "" {
			msg := c.m.input.New()
			if uerr := proto.Unmarshal(in.Data, msg.Interface()); uerr != nil {
				return err
			}
			msg.Set(c.m.resumeIn, protoreflect.ValueOfString(lastToken))
			b, merr := proto.Marshal(msg.Interface())
			if merr != nil {
				return err
			}
			in.Data = b
		}
		if failures == 1 {
			c.p.resumes.Add(ctx, 1)
			c.p.logger.InfoContext(ctx, "IPAM stream failed; resuming on another replica", "method", c.m.name, "actor", c.id.Actor, "resume_token", lastToken, "error", err)
		}
		backoff := min(time.Second, 25*time.Millisecond<<min(failures, 6))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
}

// errCallerGone marks a failure to send to the caller, which ends the call
// without resuming.
type errCallerGone struct{ err error }

func (e errCallerGone) Error() string { return e.err.Error() }

// clientStream proxies a call whose caller streams (Subscribe). The first
// message is checked before the IPAM hears of the call; every later one is
// checked before it is forwarded, and a refusal ends the call.
func (c *call) clientStream(ctx context.Context) error {
	var first Frame
	haveFirst := true
	if err := c.ss.RecvMsg(&first); err != nil {
		if !errors.Is(err, io.EOF) {
			return err
		}
		haveFirst = false
	}
	if haveFirst {
		if err := c.checkRequest(&first, true); err != nil {
			return err
		}
	} else if c.access != policy.Allow {
		c.refused = true
		return &fault.ScopeError{Reason: fmt.Sprintf("the stream must open with a message naming tenants/%s", c.id.Tenant)}
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := c.p.cfg.Backend.NewStream(sctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: c.m.serverStreams}, c.m.name)
	if err != nil {
		return err
	}
	up := make(chan error, 1)
	go func() { up <- c.forwardUp(cs, first, haveFirst) }()
	down := make(chan error, 1)
	go func() { down <- c.forwardDown(cs) }()
	for {
		select {
		case err := <-up:
			if errors.Is(err, errUpDone) {
				up = nil // wait for the IPAM to finish
				continue
			}
			cancel()
			select { // let the other direction stop using the stream
			case derr := <-down:
				_ = derr // the refusal is what the caller hears
			case <-time.After(time.Second):
			}
			return err
		case err := <-down:
			c.ss.SetTrailer(fromBackend(cs.Trailer()))
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// errUpDone ends forwardUp without ending the call: the caller closed its
// side, or the IPAM's side failed (forwardDown reports how).
var errUpDone = errors.New("proxy: nothing more to forward upstream")

// forwardUp copies the caller's messages to the IPAM. It returns errUpDone
// when the caller closes its side or the IPAM's side fails, and the
// refusal when a message fails the checks.
func (c *call) forwardUp(cs grpc.ClientStream, first Frame, haveFirst bool) error {
	if haveFirst {
		if cs.SendMsg(&first) != nil {
			return errUpDone
		}
	}
	for {
		var f Frame
		if err := c.ss.RecvMsg(&f); err != nil {
			if errors.Is(err, io.EOF) {
				_ = cs.CloseSend()
				return errUpDone
			}
			return err
		}
		if err := c.checkRequest(&f, false); err != nil {
			return err
		}
		if cs.SendMsg(&f) != nil {
			return errUpDone
		}
	}
}

// forwardDown copies the IPAM's header and messages to the caller until
// the IPAM ends the stream (io.EOF) or fails.
func (c *call) forwardDown(cs grpc.ClientStream) error {
	if h, err := cs.Header(); err == nil {
		if h = fromBackend(h); len(h) > 0 {
			_ = c.ss.SendHeader(h)
		}
	}
	for {
		var f Frame
		if err := cs.RecvMsg(&f); err != nil {
			return err
		}
		if err := c.checkResponse(&f, nil); err != nil {
			return err
		}
		if err := c.ss.SendMsg(&f); err != nil {
			return err
		}
	}
}
