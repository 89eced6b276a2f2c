package ipam

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalidCommunity is wrapped by the errors of ParseStandardCommunity and
// ParseLargeCommunity.
var ErrInvalidCommunity = errors.New("invalid BGP community")

// largePrefix marks a large community, as in MetalLB: "large:A:B:C".
const largePrefix = "large:"

// IsLargeCommunity reports whether s is written as a large community, that
// is, starts with "large:". It says nothing about whether s is valid.
func IsLargeCommunity(s string) bool { return strings.HasPrefix(s, largePrefix) }

// ParseStandardCommunity parses a standard community "A:B", A and B decimal
// numbers from 0 to 65535, into its 32-bit value A<<16 | B (RFC 1997).
func ParseStandardCommunity(s string) (uint32, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 2 {
		return 0, fmt.Errorf("%w %q: want A:B", ErrInvalidCommunity, s)
	}
	var v [2]uint32
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("%w %q: %q is not a number from 0 to 65535", ErrInvalidCommunity, s, p)
		}
		v[i] = uint32(n)
	}
	return v[0]<<16 | v[1], nil
}

// ParseLargeCommunity parses a large community "large:A:B:C", A, B and C
// decimal numbers from 0 to 4294967295 (RFC 8092).
func ParseLargeCommunity(s string) ([3]uint32, error) {
	var v [3]uint32
	rest, ok := strings.CutPrefix(s, largePrefix)
	if !ok {
		return v, fmt.Errorf("%w %q: want large:A:B:C", ErrInvalidCommunity, s)
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 3 {
		return v, fmt.Errorf("%w %q: want large:A:B:C", ErrInvalidCommunity, s)
	}
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return v, fmt.Errorf("%w %q: %q is not a number from 0 to 4294967295", ErrInvalidCommunity, s, p)
		}
		v[i] = uint32(n)
	}
	return v, nil
}
