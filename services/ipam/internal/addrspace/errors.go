package addrspace

import (
	"errors"
	"fmt"
)

// Sentinel errors, for errors.Is. A ParseRange error wraps exactly one of
// them; an error about an invalid Range or IPRange value (NewSpace,
// NewFreeList) wraps ErrInvalidRange and, where one applies, the specific
// one (ErrReversed, ErrZone, ...).
var (
	// ErrEmpty reports an empty (or all-space) range string.
	ErrEmpty = errors.New("empty range")
	// ErrSyntax reports input that is not an address, prefix or a-b range.
	ErrSyntax = errors.New("invalid syntax")
	// ErrMixedFamily reports an a-b range whose bounds are of different
	// address families, or a free list given addresses of the other family.
	ErrMixedFamily = errors.New("mixed address families")
	// ErrReversed reports an a-b range whose start is above its end.
	ErrReversed = errors.New("range start after range end")
	// ErrZone reports an IPv6 address with a zone ("fe80::1%eth0").
	ErrZone = errors.New("zoned address")
	// ErrMapped reports an IPv4-mapped IPv6 address ("::ffff:192.0.2.1").
	ErrMapped = errors.New("IPv4-mapped IPv6 address")
	// ErrHostBits reports a CIDR prefix with bits set after the prefix length.
	ErrHostBits = errors.New("host bits set")
	// ErrInvalidRange reports a Range value that is not valid (see
	// Range.IsValid), typically one built by hand rather than by ParseRange.
	ErrInvalidRange = errors.New("invalid range")
)

// ParseError is returned by ParseRange. It records the input, a
// human-readable reason, and the sentinel error classifying the failure.
type ParseError struct {
	// Input is the string given to ParseRange, unmodified.
	Input string
	// Reason explains what is wrong, e.g.
	// "host bits set; did you mean 192.0.2.0/24".
	Reason string
	// Err is the sentinel error classifying the failure (ErrSyntax, ...).
	Err error
	// Cause is the underlying error from net/netip, if any.
	Cause error
}

// Error implements error.
func (e *ParseError) Error() string {
	return fmt.Sprintf("addrspace: invalid range %q: %s", e.Input, e.Reason)
}

// Unwrap returns the sentinel error and, when present, the underlying cause,
// so that errors.Is and errors.As see both.
func (e *ParseError) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}
