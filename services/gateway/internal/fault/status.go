package fault

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/beaconlb/beacon/proto/tenantscope"
)

// errorDomain is the ErrorInfo domain of the gateway's own refusals.
const errorDomain = "gateway.beacon"

// ipamErrorDomain is the ErrorInfo domain of the IPAM's refusals
// (services/ipam/internal/server).
const ipamErrorDomain = "ipam.beacon.dev"

// sentinels maps each sentinel to its code; the message is the sentinel's
// own text, whatever wraps it.
var sentinels = []struct {
	err  error
	code codes.Code
}{
	{ErrNoCredentials, codes.Unauthenticated},
	{ErrMalformedAuthorization, codes.Unauthenticated},
	{ErrInvalidToken, codes.Unauthenticated},
	{ErrTokenUnverifiable, codes.Unavailable},
	{ErrShuttingDown, codes.Unavailable},
	{tenantscope.ErrUnknownFields, codes.InvalidArgument},
}

// Status returns the status error the caller of method sees for err, the
// error a call ended with (nil for nil):
//
//   - the gateway's own refusals (this package's errors and tenantscope's)
//     with their code and their text;
//   - a status from the IPAM as it is (the IPAM's own mapping made it),
//     but for failures of the way there: an Unavailable the IPAM did not
//     make reads "the IPAM is unavailable; retry", and Unknown, Internal
//     and DataLoss read "internal error";
//   - the caller's own cancellation or deadline;
//   - anything else as "internal error".
//
// Causes a caller is not told are logged with the method.
func Status(ctx context.Context, logger *slog.Logger, method string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrTokenUnverifiable) {
		logger.WarnContext(ctx, "cannot verify a token", "method", method, "error", err)
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return status.Error(s.code, s.err.Error())
		}
	}
	var (
		cert        *CertificateError
		unknown     *UnknownMethodError
		denied      *DeniedError
		scope       *ScopeError
		refusal     *tenantscope.Refusal
		undecodable *UndecodableError
		body        *BodyError
		limit       *LimitError
		leak        *tenantscope.LeakError
	)
	switch {
	case errors.As(err, &cert):
		return status.Error(codes.Unauthenticated, cert.Error())
	case errors.As(err, &unknown):
		return status.Error(codes.Unimplemented, unknown.Error())
	case errors.As(err, &denied):
		return status.Error(codes.PermissionDenied, denied.Error())
	case errors.As(err, &scope):
		return status.Error(codes.PermissionDenied, scope.Error())
	case errors.As(err, &refusal):
		return status.Error(codes.PermissionDenied, refusal.Error())
	case errors.As(err, &undecodable):
		logger.DebugContext(ctx, "undecodable request", "method", method, "error", err)
		return status.Errorf(codes.InvalidArgument, "cannot decode the %s request", undecodable.Method)
	case errors.As(err, &body):
		return status.Error(codes.InvalidArgument, body.Error())
	case errors.As(err, &limit):
		return exhausted(limit)
	case errors.As(err, &leak):
		logger.ErrorContext(ctx, "IPAM answered with another tenant's resource; withheld", "method", method, "error", err)
		return status.Error(codes.Internal, "internal error")
	}
	if s, ok := asStatus(err); ok {
		return fromIPAM(ctx, logger, method, s)
	}
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	logger.ErrorContext(ctx, "internal error", "method", method, "error", err)
	return status.Error(codes.Internal, "internal error")
}

// asStatus returns the status err carries, if it is (or wraps) one.
func asStatus(err error) (*status.Status, bool) {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return nil, false
	}
	return se.GRPCStatus(), true
}

// fromIPAM adapts a status met on the way to or from the IPAM.
func fromIPAM(ctx context.Context, logger *slog.Logger, method string, s *status.Status) error {
	switch s.Code() {
	case codes.Unavailable:
		if madeByIPAM(s) {
			return s.Err()
		}
		logger.DebugContext(ctx, "IPAM unavailable", "method", method, "error", s.Message())
		return status.Error(codes.Unavailable, "the IPAM is unavailable; retry")
	case codes.Unknown, codes.Internal, codes.DataLoss:
		logger.ErrorContext(ctx, "IPAM call failed", "method", method, "code", s.Code().String(), "error", s.Message())
		return status.Error(codes.Internal, "internal error")
	case codes.Canceled:
		return status.Error(codes.Canceled, "request canceled")
	case codes.DeadlineExceeded:
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	}
	return s.Err()
}

// madeByIPAM reports whether a status carries the IPAM's ErrorInfo.
func madeByIPAM(s *status.Status) bool {
	for _, d := range s.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == ipamErrorDomain {
			return true
		}
	}
	return false
}

// exhausted is a rate limit's refusal: ResourceExhausted carrying
// google.rpc.RetryInfo and google.rpc.ErrorInfo.
func exhausted(l *LimitError) error {
	st := status.New(codes.ResourceExhausted, l.Message)
	if d, err := st.WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(l.Wait)},
		&errdetails.ErrorInfo{Reason: l.Reason, Domain: errorDomain, Metadata: l.Meta},
	); err == nil {
		st = d
	}
	return st.Err()
}
