package filter

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// allocationFields returns the fields of ListAllocations, used by most tests.
func allocationFields() []string {
	return []string{"pool", "owner", "namespace", "address", "sharing_key", "labels"}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want []Term
	}{
		{"", nil},
		{" \t\r\n ", nil},
		{`pool = "blue"`, []Term{{Field: "pool", Op: Equal, Value: "blue"}}},
		{`pool="blue"`, []Term{{Field: "pool", Op: Equal, Value: "blue"}}},
		{`pool=blue`, []Term{{Field: "pool", Op: Equal, Value: "blue"}}},
		{`  pool  =  blue  `, []Term{{Field: "pool", Op: Equal, Value: "blue"}}},
		{`owner != "default/web"`, []Term{{Field: "owner", Op: NotEqual, Value: "default/web"}}},
		{`owner!=default/web`, []Term{{Field: "owner", Op: NotEqual, Value: "default/web"}}},
		{`address = 192.0.2.1`, []Term{{Field: "address", Op: Equal, Value: "192.0.2.1"}}},
		{`address = 2001:db8::1`, []Term{{Field: "address", Op: Equal, Value: "2001:db8::1"}}},
		{`address=::`, []Term{{Field: "address", Op: Equal, Value: "::"}}},
		{`sharing_key:*`, []Term{{Field: "sharing_key", Op: Has}}},
		{`sharing_key : *`, []Term{{Field: "sharing_key", Op: Has}}},
		{`owner = ""`, []Term{{Field: "owner", Op: Equal, Value: ""}}},
		{`owner = "a \"b\" \\ c AND d = e"`, []Term{{Field: "owner", Op: Equal, Value: `a "b" \ c AND d = e`}}},
		{`owner = "AND"`, []Term{{Field: "owner", Op: Equal, Value: "AND"}}},
		{`owner = "ünïcode ✓"`, []Term{{Field: "owner", Op: Equal, Value: "ünïcode ✓"}}},
		{`owner = -_.:/Aa9`, []Term{{Field: "owner", Op: Equal, Value: "-_.:/Aa9"}}},
		{`labels.app = web`, []Term{{Field: "labels", Key: "app", Op: Equal, Value: "web"}}},
		{`labels.app.kubernetes.io/name != "web"`, []Term{{Field: "labels", Key: "app.kubernetes.io/name", Op: NotEqual, Value: "web"}}},
		{`labels."example.com/team"="a"`, []Term{{Field: "labels", Key: "example.com/team", Op: Equal, Value: "a"}}},
		{`labels.my-key_1:*`, []Term{{Field: "labels", Key: "my-key_1", Op: Has}}},
		{`labels."app":*`, []Term{{Field: "labels", Key: "app", Op: Has}}},
		{
			`pool = blue AND labels.app:* AND address != 2001:db8::1`,
			[]Term{
				{Field: "pool", Op: Equal, Value: "blue"},
				{Field: "labels", Key: "app", Op: Has},
				{Field: "address", Op: NotEqual, Value: "2001:db8::1"},
			},
		},
		{
			`pool="a"AND owner="b"`,
			[]Term{{Field: "pool", Op: Equal, Value: "a"}, {Field: "owner", Op: Equal, Value: "b"}},
		},
		{
			"labels.x:*AND\tpool=a",
			[]Term{{Field: "labels", Key: "x", Op: Has}, {Field: "pool", Op: Equal, Value: "a"}},
		},
		{
			strings.TrimSuffix(strings.Repeat("pool=a AND ", MaxTerms), " AND "),
			repeatTerm(Term{Field: "pool", Op: Equal, Value: "a"}, MaxTerms),
		},
		{
			`owner = "` + strings.Repeat("x", MaxLength-len(`owner = ""`)) + `"`,
			[]Term{{Field: "owner", Op: Equal, Value: strings.Repeat("x", MaxLength-len(`owner = ""`))}},
		},
	}
	for _, tt := range tests {
		t.Run(shorten(tt.in), func(t *testing.T) {
			got, err := Parse(tt.in, allocationFields()...)
			if err != nil {
				t.Fatalf("Parse(%q) error: %v", tt.in, err)
			}
			if diff := cmp.Diff(Filter{Terms: tt.want}, got); diff != "" {
				t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tooMany := strings.Repeat("pool=a AND ", MaxTerms) + "pool=a"
	tests := []struct {
		in     string
		fields []string // nil: allocationFields
		want   SyntaxError
	}{
		{`owner ~ "x"`, nil, SyntaxError{6, `expected "=", "!=" or ":"`}},
		{`owner  ~ "x"`, nil, SyntaxError{7, `expected "=", "!=" or ":"`}},
		{`owner`, nil, SyntaxError{5, `expected "=", "!=" or ":"`}},
		{`owner ! x`, nil, SyntaxError{6, `expected "=", "!=" or ":"`}},
		{`owner == x`, nil, SyntaxError{7, "expected value"}},
		{`owner =`, nil, SyntaxError{7, "expected value"}},
		{`owner = *`, nil, SyntaxError{8, "expected value"}},
		{`owner = AND pool = x`, nil, SyntaxError{8, `expected value; write "AND" quoted to compare with it`}},
		{`owner:x`, nil, SyntaxError{6, `expected "*" after ":"`}},
		{`owner:"*"`, nil, SyntaxError{6, `expected "*" after ":"`}},
		{`owner = "abc`, nil, SyntaxError{8, "unterminated string"}},
		{`owner = "abc\`, nil, SyntaxError{8, "unterminated string"}},
		{`owner = "a\nb"`, nil, SyntaxError{10, `invalid escape; only \" and \\ are allowed`}},
		{`= x`, nil, SyntaxError{0, "expected field name"}},
		{`"pool" = x`, nil, SyntaxError{0, "expected field name"}},
		{`pool = a AND`, nil, SyntaxError{12, "expected field name"}},
		{`pool = a AND `, nil, SyntaxError{13, "expected field name"}},
		{`AND pool = a`, nil, SyntaxError{0, `unknown field "AND"; allowed: pool, owner, namespace, address, sharing_key, labels.KEY`}},
		{`pool = a and owner = b`, nil, SyntaxError{9, `expected "AND" or end of filter`}},
		{`pool = a OR owner = b`, nil, SyntaxError{9, `expected "AND" or end of filter`}},
		{`pool = a owner = b`, nil, SyntaxError{9, `expected "AND" or end of filter`}},
		{`pool = "a"ANDowner = b`, nil, SyntaxError{10, `expected "AND" or end of filter`}},
		{`pool = a"b"`, nil, SyntaxError{8, `expected "AND" or end of filter`}},
		{`(pool = a)`, nil, SyntaxError{0, "expected field name"}},
		{`tenant = t`, nil, SyntaxError{0, `unknown field "tenant"; allowed: pool, owner, namespace, address, sharing_key, labels.KEY`}},
		{`Pool = a`, nil, SyntaxError{0, `unknown field "Pool"; allowed: pool, owner, namespace, address, sharing_key, labels.KEY`}},
		{`pool = a AND Owner = b`, nil, SyntaxError{13, `unknown field "Owner"; allowed: pool, owner, namespace, address, sharing_key, labels.KEY`}},
		{`labels.app = x`, []string{"tenant"}, SyntaxError{0, `unknown field "labels"; allowed: tenant`}},
		{`pool = x`, []string{}, SyntaxError{0, `unknown field "pool"; this list cannot be filtered`}},
		{`Pool = x`, []string{"Pool"}, SyntaxError{0, `unknown field "Pool"; allowed: Pool`}},
		{`labels = x`, nil, SyntaxError{6, `expected "." and a label key after "labels"`}},
		{`labels:*`, nil, SyntaxError{6, `expected "." and a label key after "labels"`}},
		{`labels. app = x`, nil, SyntaxError{7, "expected label key"}},
		{`labels.:*`, nil, SyntaxError{7, "expected label key"}},
		{`labels."" = x`, nil, SyntaxError{7, `invalid label key "": want letters, digits and - _ . /`}},
		{`labels."a b" = x`, nil, SyntaxError{7, `invalid label key "a b": want letters, digits and - _ . /`}},
		{`labels."app = x`, nil, SyntaxError{7, "unterminated string"}},
		{"owner = \"\xff\"", nil, SyntaxError{9, "invalid UTF-8"}},
		{tooMany, nil, SyntaxError{MaxTerms * len("pool=a AND "), "more than 32 terms"}},
		{
			`owner = "` + strings.Repeat("x", MaxLength) + `"`, nil,
			SyntaxError{MaxLength, "filter is 2058 bytes long; the limit is 2048"},
		},
	}
	for _, tt := range tests {
		t.Run(shorten(tt.in), func(t *testing.T) {
			fields := tt.fields
			if fields == nil {
				fields = allocationFields()
			}
			f, err := Parse(tt.in, fields...)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) = %v, %v; want *SyntaxError", tt.in, f, err)
			}
			if diff := cmp.Diff(tt.want, *se); diff != "" {
				t.Errorf("Parse(%q) error mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestSyntaxErrorError(t *testing.T) {
	_, err := Parse(`owner  ~ "x"`, "owner")
	want := `filter: at 7: expected "=", "!=" or ":"`
	if err == nil || err.Error() != want {
		t.Errorf("Parse error = %v, want %s", err, want)
	}
}

func repeatTerm(t Term, n int) []Term {
	ts := make([]Term, n)
	for i := range ts {
		ts[i] = t
	}
	return ts
}

// shorten keeps subtest names of long inputs readable.
func shorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
