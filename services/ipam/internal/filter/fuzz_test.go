package filter

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// FuzzParse checks that Parse never panics, that its errors are
// *SyntaxErrors pointing into the input, and that a parsed filter renders
// with String to text that parses back to the same filter.
func FuzzParse(f *testing.F) {
	fields := []string{"pool", "owner", "address", "labels"}
	f.Fuzz(func(t *testing.T, s string) {
		flt, err := Parse(s, fields...)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) error %v is %T, want *SyntaxError", s, err, err)
			}
			if se.Pos < 0 || se.Pos > len(s) || se.Reason == "" {
				t.Fatalf("Parse(%q) error %#v: position outside the input or no reason", s, se)
			}
			return
		}
		if len(flt.Terms) > MaxTerms {
			t.Fatalf("Parse(%q) gave %d terms, more than %d", s, len(flt.Terms), MaxTerms)
		}
		for _, term := range flt.Terms {
			if term.Field == labelsField && !isKey(term.Key) || term.Field != labelsField && term.Key != "" {
				t.Fatalf("Parse(%q) gave a term with a bad key: %#v", s, term)
			}
		}

		// The rendering parses back, through Parse when it fits in
		// MaxLength (it may not: rendering adds quotes and spaces).
		rendered := flt.String()
		var again Filter
		if len(rendered) <= MaxLength {
			again, err = Parse(rendered, fields...)
		} else {
			again, err = parse(rendered, fields)
		}
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q, which does not parse: %v", s, rendered, err)
		}
		if diff := cmp.Diff(flt, again); diff != "" {
			t.Fatalf("Parse(%q).String() = %q, which parses differently (-first +again):\n%s", s, rendered, diff)
		}
		if again.String() != rendered {
			t.Fatalf("String is not canonical: %q, then %q", rendered, again.String())
		}

		// An object whose pool differs from the indexed value never matches.
		if v, ok := flt.Value("pool"); ok {
			get := func(field string) (string, bool) { return v + "x", true }
			if flt.Match(get, selector.Set{}) {
				t.Fatalf("Parse(%q) matches pool %q though Value(pool) = %q", s, v+"x", v)
			}
		}
		flt.Match(nil, selector.NewSet("app", "web"))
		flt.Match(func(f string) (string, bool) { return strings.ToUpper(f), f != "owner" }, selector.Set{})
	})
}

// FuzzNarrowedFilter checks the gateway's OwnPools narrowing (a tenant's
// pool listing gets its filter, if any, followed by ` AND tenant = "T"`,
// see services/gateway/internal/policy): whatever the tenant wrote before
// it, a narrowed filter that parses keeps the tenant term, so it never
// matches a pool of another tenant.
func FuzzNarrowedFilter(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		const tenant = "t1"
		narrowed := fmt.Sprintf("tenant = %q", tenant)
		if s = strings.TrimSpace(s); s != "" {
			narrowed = s + " AND " + narrowed
		}
		flt, err := Parse(narrowed, "labels", "tenant")
		if err != nil {
			return
		}
		want := Term{Field: "tenant", Op: Equal, Value: tenant}
		if !slices.Contains(flt.Terms, want) {
			t.Fatalf("narrowed filter %q parses without the tenant term: %#v", narrowed, flt)
		}
		other := func(string) (string, bool) { return tenant + "x", true }
		if flt.Match(other, selector.Set{}) || flt.Match(nil, selector.Set{}) {
			t.Fatalf("narrowed filter %q matches a pool of another tenant or of none", narrowed)
		}
	})
}
