package ipam

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every layer wraps them with %w; the gRPC layer turns them
// into status codes in one place.
var (
	ErrNotFound          = errors.New("not found")
	ErrAlreadyExists     = errors.New("already exists")
	ErrPoolExhausted     = errors.New("no free address")
	ErrAddressInUse      = errors.New("address in use")
	ErrAddressNotInPool  = errors.New("address in no pool")
	ErrNotAllowed        = errors.New("not allowed")
	ErrPoolOverlap       = errors.New("pools overlap")
	ErrPoolInUse         = errors.New("pool holds allocations")
	ErrInUse             = errors.New("in use")
	ErrQuotaExceeded     = errors.New("tenant quota exceeded")
	ErrEtagMismatch      = errors.New("etag mismatch")
	ErrOwnerConflict     = errors.New("owner holds a different allocation")
	ErrRequestIDReused   = errors.New("request_id reused for a different request")
	ErrTooMuchContention = errors.New("too much contention")
	ErrResumeTooOld      = errors.New("resume token too old")
	ErrNoLongerExpiring  = errors.New("allocation has no ttl")
	// ErrTooLarge is a change bigger than one etcd transaction may carry
	// (bytes or operations).
	ErrTooLarge = errors.New("request too large")
	// ErrConflict means a change's preconditions no longer held when it
	// was committed; the caller plans again.
	ErrConflict = errors.New("conflict")
	// ErrUnavailable wraps storage failures a client should retry.
	ErrUnavailable = errors.New("storage unavailable")
)

// FieldError is a bad field in a request: which field, and why.
type FieldError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Reason) }

// FieldErrors is every bad field of one request.
type FieldErrors []*FieldError

// Error implements error.
func (es FieldErrors) Error() string {
	if len(es) == 1 {
		return es[0].Error()
	}
	return fmt.Sprintf("%s (and %d more)", es[0].Error(), len(es)-1)
}

// Add records a bad field.
func (es *FieldErrors) Add(field, format string, args ...any) {
	*es = append(*es, &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

// Err returns nil when no field was bad, else the errors.
func (es FieldErrors) Err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// Refusal is a domain refusal carrying a message that is safe to show the
// caller, wrapped around a sentinel that decides its status code.
type Refusal struct {
	Err    error  // a sentinel above
	Reason string // safe to show clients
	// Details are facts about the refusal that are safe to show clients,
	// sent as the ErrorInfo's metadata (see the Detail constants).
	Details map[string]string
}

// Detail keys of a Refusal.
const (
	// DetailHeldFor is the released owner an address is kept for.
	DetailHeldFor = "held_for"
	// DetailHoldExpireTime is when that hold ends (RFC 3339).
	DetailHoldExpireTime = "hold_expire_time"
)

// With returns r with the detail key set to value.
func (r *Refusal) With(key, value string) *Refusal {
	if r.Details == nil {
		r.Details = map[string]string{}
	}
	r.Details[key] = value
	return r
}

// Refuse returns a Refusal of err with a message for the caller.
func Refuse(err error, format string, args ...any) *Refusal {
	return &Refusal{Err: err, Reason: fmt.Sprintf(format, args...)}
}

// Error implements error.
func (r *Refusal) Error() string { return r.Reason }

// Unwrap returns the sentinel.
func (r *Refusal) Unwrap() error { return r.Err }
