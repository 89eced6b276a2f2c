package server

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/subscription"
)

// errorDomain is the ErrorInfo domain of Beacon's IPAM errors.
const errorDomain = "ipam.beacon.dev"

// codeOf maps each domain sentinel to its status code and ErrorInfo reason.
var codeOf = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{ipam.ErrNotFound, codes.NotFound, "NOT_FOUND"},
	{ipam.ErrAlreadyExists, codes.AlreadyExists, "ALREADY_EXISTS"},
	{ipam.ErrPoolExhausted, codes.ResourceExhausted, "POOL_EXHAUSTED"},
	{ipam.ErrQuotaExceeded, codes.ResourceExhausted, "QUOTA_EXCEEDED"},
	{ipam.ErrAddressInUse, codes.FailedPrecondition, "ADDRESS_IN_USE"},
	{ipam.ErrAddressNotInPool, codes.FailedPrecondition, "ADDRESS_NOT_IN_POOL"},
	{ipam.ErrNotAllowed, codes.FailedPrecondition, "NOT_ALLOWED"},
	{ipam.ErrPoolOverlap, codes.FailedPrecondition, "POOL_OVERLAP"},
	{ipam.ErrPoolInUse, codes.FailedPrecondition, "POOL_IN_USE"},
	{ipam.ErrInUse, codes.FailedPrecondition, "IN_USE"},
	{ipam.ErrOwnerConflict, codes.FailedPrecondition, "OWNER_HOLDS_OTHER_ALLOCATION"},
	{ipam.ErrNoLongerExpiring, codes.FailedPrecondition, "NO_TTL"},
	{ipam.ErrRequestIDReused, codes.InvalidArgument, "REQUEST_ID_REUSED"},
	{ipam.ErrTooLarge, codes.InvalidArgument, "REQUEST_TOO_LARGE"},
	{ipam.ErrEtagMismatch, codes.Aborted, "ETAG_MISMATCH"},
	{ipam.ErrTooMuchContention, codes.Aborted, "CONTENTION"},
	{ipam.ErrConflict, codes.Aborted, "CONTENTION"},
	{ipam.ErrResumeTooOld, codes.OutOfRange, "RESUME_TOKEN_TOO_OLD"},
	{ipam.ErrUnavailable, codes.Unavailable, "STORAGE_UNAVAILABLE"},
}

// toStatus turns any error of a handler into the status sent to the
// client: field errors as InvalidArgument with BadRequest details, domain
// refusals with their safe message and an ErrorInfo reason, and everything
// else as a generic message (the cause is logged, never sent).
func toStatus(ctx context.Context, logger *slog.Logger, method string, err error) error {
	if err == nil {
		return nil
	}
	// Only a status made here passes as it is. status.FromError would also
	// pass a gRPC error of etcd's client wrapped by the store, with its code
	// and with the store's text (keys) as the message.
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err
	}
	// The access guard's refusal of an announcer's message, carried through
	// the session: the guard made that status for the announcer.
	if errors.Is(err, subscription.ErrRefused) {
		var se interface{ GRPCStatus() *status.Status }
		if errors.As(err, &se) {
			return se.GRPCStatus().Err()
		}
	}
	var fes ipam.FieldErrors
	var fe *ipam.FieldError
	switch {
	case errors.As(err, &fes):
		return badRequest(fes)
	case errors.As(err, &fe):
		return badRequest(ipam.FieldErrors{fe})
	// A context error is the caller's only when the caller's context is
	// done; otherwise it is the store's own bound on an etcd call, wrapped
	// as ipam.ErrUnavailable below.
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return status.Error(codes.Canceled, "request canceled")
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	// How an announcer session ends on this side (the text is the
	// session's own, for the announcer).
	case errors.Is(err, subscription.ErrStopping):
		return errStopping
	case errors.Is(err, subscription.ErrNoHeartbeat):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, subscription.ErrLeaseLost):
		logger.WarnContext(ctx, "announcer session ended: replica lease lost", "method", method, "error", err)
		return status.Error(codes.Unavailable, subscription.ErrLeaseLost.Error())
	case errors.Is(err, subscription.ErrTakenOver):
		return status.Error(codes.Aborted, subscription.ErrTakenOver.Error())
	}
	for _, m := range codeOf {
		if !errors.Is(err, m.err) {
			continue
		}
		msg := m.err.Error()
		var meta map[string]string
		var r *ipam.Refusal
		if errors.As(err, &r) {
			msg, meta = r.Reason, r.Details
		} else if m.code == codes.Unavailable {
			logger.WarnContext(ctx, "storage unavailable", "method", method, "error", err)
			msg = "storage unavailable; retry"
		}
		st := status.New(m.code, msg)
		if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: m.reason, Domain: errorDomain, Metadata: meta}); derr == nil {
			st = d
		}
		return st.Err()
	}
	logger.ErrorContext(ctx, "internal error", "method", method, "error", err)
	return status.Error(codes.Internal, "internal error")
}

func badRequest(fes ipam.FieldErrors) error {
	st := status.New(codes.InvalidArgument, fes.Error())
	br := &errdetails.BadRequest{}
	for _, f := range fes {
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: f.Field, Description: f.Reason})
	}
	if d, err := st.WithDetails(br); err == nil {
		st = d
	}
	return st.Err()
}
