package ipam

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// strictParts reports whether s is n decimal numbers without signs or
// leading zeros, each at most max, separated by ':'.
func strictParts(s string, n int, max uint64) bool {
	parts := strings.Split(s, ":")
	if len(parts) != n {
		return false
	}
	for _, p := range parts {
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil || v > max || strconv.FormatUint(v, 10) != p {
			return false
		}
	}
	return true
}

// FuzzStandardCommunity checks ParseStandardCommunity: its errors wrap
// ErrInvalidCommunity and quote the input; what it accepts renders as A:B
// and parses back to the same value; every canonical A:B with 16-bit parts
// is accepted; any other accepted spelling differs only by leading zeros.
func FuzzStandardCommunity(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string, v uint32) {
		got, err := ParseStandardCommunity(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidCommunity) || !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParseStandardCommunity(%q) error %q does not wrap ErrInvalidCommunity or quote the input", s, err)
			}
			if strictParts(s, 2, 0xffff) {
				t.Fatalf("ParseStandardCommunity(%q) refused a canonical community: %v", s, err)
			}
		} else {
			canon := fmt.Sprintf("%d:%d", got>>16, got&0xffff)
			if again, err := ParseStandardCommunity(canon); err != nil || again != got {
				t.Fatalf("ParseStandardCommunity(%q) = %d renders %q, which parses as %d, %v", s, got, canon, again, err)
			}
			if canon != s && trimZeros(s) != canon {
				t.Fatalf("ParseStandardCommunity(%q) = %s: accepted a spelling that is not A:B", s, canon)
			}
		}
		text := fmt.Sprintf("%d:%d", v>>16, v&0xffff)
		if back, err := ParseStandardCommunity(text); err != nil || back != v {
			t.Fatalf("ParseStandardCommunity(%q) = %d, %v; want %d", text, back, err, v)
		}
	})
}

// FuzzLargeCommunity does the same for large:A:B:C with 32-bit parts, and
// checks IsLargeCommunity tells the two forms apart.
func FuzzLargeCommunity(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string, a, b, c uint32) {
		got, err := ParseLargeCommunity(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidCommunity) || !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParseLargeCommunity(%q) error %q does not wrap ErrInvalidCommunity or quote the input", s, err)
			}
			if rest, ok := strings.CutPrefix(s, "large:"); ok && strictParts(rest, 3, 0xffffffff) {
				t.Fatalf("ParseLargeCommunity(%q) refused a canonical community: %v", s, err)
			}
		} else {
			if !IsLargeCommunity(s) {
				t.Fatalf("ParseLargeCommunity(%q) accepted what IsLargeCommunity says is not large", s)
			}
			canon := fmt.Sprintf("large:%d:%d:%d", got[0], got[1], got[2])
			if again, err := ParseLargeCommunity(canon); err != nil || again != got {
				t.Fatalf("ParseLargeCommunity(%q) = %v renders %q, which parses as %v, %v", s, got, canon, again, err)
			}
			if canon != s && "large:"+trimZeros(strings.TrimPrefix(s, "large:")) != canon {
				t.Fatalf("ParseLargeCommunity(%q) = %s: accepted a spelling that is not large:A:B:C", s, canon)
			}
			if _, err := ParseStandardCommunity(s); err == nil {
				t.Fatalf("%q parses as both a standard and a large community", s)
			}
		}
		text := fmt.Sprintf("large:%d:%d:%d", a, b, c)
		if back, err := ParseLargeCommunity(text); err != nil || back != [3]uint32{a, b, c} {
			t.Fatalf("ParseLargeCommunity(%q) = %v, %v", text, back, err)
		}
	})
}

// trimZeros drops the leading zeros of each ':'-separated part of s.
func trimZeros(s string) string {
	parts := strings.Split(s, ":")
	for i, p := range parts {
		if t := strings.TrimLeft(p, "0"); t != "" || p == "" {
			parts[i] = t
		} else {
			parts[i] = "0"
		}
	}
	return strings.Join(parts, ":")
}
