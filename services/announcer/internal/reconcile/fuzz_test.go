package reconcile

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// FuzzRouteCommunities checks how the announcer reads the communities of a
// planned route, which the IPAM renders as "%d:%d" (standard) and
// "%d:%d:%d" (large): every such rendering parses back to its value, and
// whatever parses is decimal numbers of the right width that render back
// to the same value (up to leading zeros).
func FuzzRouteCommunities(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string, v, a, b, c uint32) {
		text := fmt.Sprintf("%d:%d", v>>16, v&0xffff)
		if got, err := parseStandard(text); err != nil || got != v {
			t.Fatalf("parseStandard(%q) = %d, %v; want %d", text, got, err, v)
		}
		text = fmt.Sprintf("%d:%d:%d", a, b, c)
		if got, err := parseLarge(text); err != nil || got != [3]uint32{a, b, c} {
			t.Fatalf("parseLarge(%q) = %v, %v", text, got, err)
		}
		if got, err := parseStandard(s); err == nil {
			checkDecimal(t, s, 2)
			if again, err := parseStandard(fmt.Sprintf("%d:%d", got>>16, got&0xffff)); err != nil || again != got {
				t.Fatalf("parseStandard(%q) = %d does not render back", s, got)
			}
		} else if !strings.Contains(err.Error(), strconv.Quote(s)) {
			t.Fatalf("parseStandard(%q) error %q does not quote the input", s, err)
		}
		if got, err := parseLarge(s); err == nil {
			checkDecimal(t, s, 3)
			if again, err := parseLarge(fmt.Sprintf("%d:%d:%d", got[0], got[1], got[2])); err != nil || again != got {
				t.Fatalf("parseLarge(%q) = %v does not render back", s, got)
			}
		} else if !strings.Contains(err.Error(), strconv.Quote(s)) {
			t.Fatalf("parseLarge(%q) error %q does not quote the input", s, err)
		}
	})
}

// checkDecimal fails unless s is n ':'-separated runs of decimal digits.
func checkDecimal(t *testing.T, s string, n int) {
	t.Helper()
	parts := strings.Split(s, ":")
	if len(parts) != n {
		t.Fatalf("%q accepted with %d parts, want %d", s, len(parts), n)
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			t.Fatalf("%q accepted with part %q", s, p)
		}
	}
}
