// Package rest is the gateway's REST/JSON edge: the grpc-gateway reverse
// proxy generated from proto/http/ipam_http.yaml (package ipamv1gw), in
// front of a connection to the gateway's own in-process gRPC server, so
// that REST calls take exactly the path gRPC calls take (authentication,
// authorization, tenant scope, limits). It adds what the generated code
// does not do: a body size limit, early refusal of malformed JSON, errors
// with Retry-After and WWW-Authenticate, and the OpenAPI document.
package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/beaconlb/beacon/services/gateway/internal/auth"
	"github.com/beaconlb/beacon/services/gateway/internal/fault"
	"github.com/beaconlb/beacon/services/gateway/internal/rest/ipamv1gw"
)

// DefaultMaxBodyBytes is the default limit of a REST request body.
const DefaultMaxBodyBytes = 1 << 20

// Options configure the REST edge.
type Options struct {
	// MaxBodyBytes bounds request bodies (default DefaultMaxBodyBytes);
	// larger ones get 413.
	MaxBodyBytes int64
	// Logger receives what fault.Status logs of refused bodies (default:
	// none).
	Logger *slog.Logger
}

// NewHandler returns the REST handler for /v1/..., calling conn (a
// connection to the gateway's in-process gRPC server). The caller's
// Authorization header is forwarded as is; the identity URI of a verified
// client certificate is forwarded on auth.ForwardedCertKey, which only the
// in-process server trusts. No other header reaches gRPC metadata except
// W3C trace context.
func NewHandler(ctx context.Context, conn *grpc.ClientConn, opts Options) (http.Handler, error) {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	mux := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
		}),
		runtime.WithIncomingHeaderMatcher(incomingHeader),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithOutgoingTrailerMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithMetadata(forwardCertificate),
		runtime.WithMetadata(forwardAddr),
		runtime.WithErrorHandler(ErrorHandler),
	)
	for _, register := range []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error{
		ipamv1gw.RegisterPoolServiceHandler,
		ipamv1gw.RegisterAllocationServiceHandler,
		ipamv1gw.RegisterAuditServiceHandler,
		ipamv1gw.RegisterAnnouncementServiceHandler,
		ipamv1gw.RegisterAnnouncerServiceHandler,
		ipamv1gw.RegisterTenantServiceHandler,
		ipamv1gw.RegisterTokenServiceHandler,
		ipamv1gw.RegisterGlobalGroupServiceHandler,
	} {
		if err := register(ctx, mux, conn); err != nil {
			return nil, fmt.Errorf("rest: %w", err)
		}
	}
	return limitBody(mux, opts.MaxBodyBytes, opts.Logger), nil
}

// incomingHeader forwards only W3C trace context; everything else a client
// sends stays out of the gRPC metadata (in particular anything that could
// pose as auth.ForwardedCertKey or beacon-actor). grpc-gateway forwards
// Authorization by itself.
func incomingHeader(key string) (string, bool) {
	switch k := strings.ToLower(key); k {
	case "traceparent", "tracestate", "baggage":
		return k, true
	}
	return "", false
}

// forwardCertificate passes the identity of the caller's verified client
// certificate to the in-process gRPC server.
func forwardCertificate(_ context.Context, r *http.Request) metadata.MD {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil
	}
	uri, err := auth.CertificateURI(r.TLS.VerifiedChains[0][0])
	if err != nil {
		return metadata.Pairs(auth.ForwardedCertKey, auth.ForwardedCertErrorPrefix+err.Error())
	}
	return metadata.Pairs(auth.ForwardedCertKey, uri)
}

// forwardAddr passes the caller's IP address to the in-process gRPC server
// (for the limit on failed authentications).
func forwardAddr(_ context.Context, r *http.Request) metadata.MD {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return nil
	}
	return metadata.Pairs(auth.ForwardedAddrKey, ap.Addr().Unmap().String())
}

// limitBody refuses bodies over max bytes (413) and bodies that are not
// one well-formed JSON value (400) before grpc-gateway decodes them. The
// body is read into memory, which the limit keeps small.
func limitBody(next http.Handler, maxBytes int64, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse := func(code int, reason string) {
			err := fault.Status(r.Context(), logger, r.URL.Path, &fault.BodyError{Reason: reason})
			writeStatus(w, code, status.Convert(err))
		}
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > maxBytes {
			refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", maxBytes))
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBytes+1))
		if err != nil {
			refuse(http.StatusBadRequest, "cannot read the request body")
			return
		}
		if int64(len(body)) > maxBytes {
			refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", maxBytes))
			return
		}
		if len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
			refuse(http.StatusBadRequest, "request body is not valid JSON")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

var errorMarshaler = &runtime.JSONPb{}

// ErrorHandler writes a gRPC status as grpc-gateway does (JSON with code,
// message and details; the HTTP status mapped from the code), adding
// Retry-After from a google.rpc.RetryInfo detail (rate limits: 429) and a
// Bearer challenge on 401.
func ErrorHandler(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, _ *http.Request, err error) {
	code := 0
	var he *runtime.HTTPStatusError
	if errors.As(err, &he) {
		code, err = he.HTTPStatus, he.Err
	}
	s := status.Convert(err)
	if code == 0 {
		code = runtime.HTTPStatusFromCode(s.Code())
	}
	writeStatus(w, code, s)
}

func writeStatus(w http.ResponseWriter, code int, s *status.Status) {
	for _, d := range s.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			secs := int64(math.Ceil(ri.GetRetryDelay().AsDuration().Seconds()))
			w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
		}
	}
	if s.Code() == codes.Unauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="beacon"`)
	}
	body, err := errorMarshaler.Marshal(s.Proto())
	if err != nil {
		body = []byte(`{"code": 13, "message": "failed to marshal error message"}`)
		code = http.StatusInternalServerError
	}
	w.Header().Del("Trailer")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
