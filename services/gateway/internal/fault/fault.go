// Package fault owns the gateway's errors: the sentinels and types its
// packages return when they refuse or fail a call, and Status, the one
// function that turns any error of a call into the gRPC status its caller
// sees. Nothing internal reaches a client: causes that are not the
// caller's business (a decoding failure, a transport error on the way to
// the IPAM) are logged and answered with a generic message.
package fault

import (
	"errors"
	"fmt"
	"time"
)

// Errors of authentication (Unauthenticated, but ErrTokenUnverifiable).
var (
	// ErrNoCredentials: the caller presented neither a client certificate
	// nor an authorization.
	ErrNoCredentials = errors.New(`no credentials: present a client certificate or "authorization: Bearer SECRET"`)
	// ErrMalformedAuthorization: an authorization that is not one
	// "Bearer SECRET".
	ErrMalformedAuthorization = errors.New(`authorization must be one "Bearer SECRET"`)
	// ErrInvalidToken: a token the IPAM does not know, or no longer does.
	ErrInvalidToken = errors.New("invalid, revoked or expired token")
	// ErrTokenUnverifiable: the IPAM could not be asked about a token now
	// (Unavailable).
	ErrTokenUnverifiable = errors.New("cannot verify the token now; retry")
)

// ErrShuttingDown ends the streams of a gateway that is stopping
// (Unavailable: the caller reconnects to another).
var ErrShuttingDown = errors.New("the gateway is shutting down; reconnect")

// CertificateError is a presented client certificate that carries no
// usable Beacon identity. Reason is the gateway's own words.
type CertificateError struct{ Reason string }

func (e *CertificateError) Error() string { return e.Reason }

// UnknownMethodError is a call of a method the IPAM's API does not have
// (Unimplemented).
type UnknownMethodError struct{ Method string }

func (e *UnknownMethodError) Error() string { return "unknown method " + e.Method }

// DeniedError is a call the role may not make (PermissionDenied).
type DeniedError struct{ Role, Method string }

func (e *DeniedError) Error() string { return fmt.Sprintf("role %s may not call %s", e.Role, e.Method) }

// ScopeError is a call that reaches outside the caller's tenant
// (PermissionDenied): Reason says how, in words fit for the caller.
type ScopeError struct{ Reason string }

func (e *ScopeError) Error() string { return e.Reason }

// UndecodableError is a request the gateway cannot decode to check it
// (InvalidArgument). Cause is logged, not sent.
type UndecodableError struct {
	Method string
	Cause  error
}

func (e *UndecodableError) Error() string {
	return fmt.Sprintf("cannot decode the %s request: %v", e.Method, e.Cause)
}

func (e *UndecodableError) Unwrap() error { return e.Cause }

// BodyError is a REST request body refused before it is decoded
// (InvalidArgument). Reason is the gateway's own words.
type BodyError struct{ Reason string }

func (e *BodyError) Error() string { return e.Reason }

// LimitError is a call refused by a rate limit (ResourceExhausted, with
// RetryInfo and ErrorInfo details). Message says which limit; Reason and
// Meta are the ErrorInfo's.
type LimitError struct {
	Message string
	Wait    time.Duration
	Reason  string
	Meta    map[string]string
}

func (e *LimitError) Error() string { return e.Message }
