package filter

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

func TestMatch(t *testing.T) {
	// The object: pool "blue", owner "default/web", sharing_key empty, no
	// namespace field at all.
	obj := map[string]string{"pool": "blue", "owner": "default/web", "address": "2001:db8::1", "sharing_key": ""}
	get := func(f string) (string, bool) { v, ok := obj[f]; return v, ok }
	labels := map[string]string{"app": "web", "example.com/team": "a", "empty": ""}

	tests := []struct {
		filter string
		want   bool
	}{
		{``, true},
		{`pool = blue`, true},
		{`pool = "blue"`, true},
		{`pool = Blue`, false},
		{`pool = red`, false},
		{`pool != red`, true},
		{`pool != blue`, false},
		{`address = "2001:db8::1"`, true},
		{`owner = "default/web" AND pool = blue`, true},
		{`owner = "default/web" AND pool = red`, false},
		{`pool:*`, true},
		{`sharing_key:*`, false}, // present but empty
		{`sharing_key = ""`, true},
		{`sharing_key != ""`, false},
		{`namespace:*`, false}, // missing
		{`namespace = ""`, false},
		{`namespace != x`, true},
		{`namespace != ""`, true},

		{`labels.app = web`, true},
		{`labels.app = db`, false},
		{`labels.app != db`, true},
		{`labels.app != web`, false},
		{`labels."example.com/team" = a`, true},
		{`labels.example.com/team = a`, true},
		{`labels.app:*`, true},
		{`labels.empty:*`, true}, // a label with an empty value is present
		{`labels.empty = ""`, true},
		{`labels.zone:*`, false},
		{`labels.zone = ""`, false},
		{`labels.zone != a`, true},
		{`labels.app:* AND labels.zone != a AND pool = blue`, true},
	}
	for _, tt := range tests {
		t.Run(tt.filter, func(t *testing.T) {
			f, err := Parse(tt.filter, allocationFields()...)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.filter, err)
			}
			if got := f.Match(get, selector.SetOf(labels)); got != tt.want {
				t.Errorf("Parse(%q).Match() = %v, want %v", tt.filter, got, tt.want)
			}
		})
	}
}

func TestMatchEdgeCases(t *testing.T) {
	tests := []struct {
		name   string
		f      Filter
		get    func(string) (string, bool)
		labels map[string]string
		want   bool
	}{
		{"nil get, Equal", Filter{Terms: []Term{{Field: "pool", Op: Equal, Value: "a"}}}, nil, nil, false},
		{"nil get, NotEqual", Filter{Terms: []Term{{Field: "pool", Op: NotEqual, Value: "a"}}}, nil, nil, true},
		{"nil get, Has", Filter{Terms: []Term{{Field: "pool", Op: Has}}}, nil, nil, false},
		{"nil labels, NotEqual", Filter{Terms: []Term{{Field: "labels", Key: "a", Op: NotEqual, Value: "a"}}}, nil, nil, true},
		{"zero Op never holds", Filter{Terms: []Term{{Field: "labels", Key: "a"}}}, nil, map[string]string{"a": ""}, false},
		{"unknown Op never holds", Filter{Terms: []Term{{Field: "labels", Key: "a", Op: 9}}}, nil, map[string]string{"a": ""}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f.Match(tt.get, selector.SetOf(tt.labels)); got != tt.want {
				t.Errorf("%v.Match() = %v, want %v", tt.f, got, tt.want)
			}
		})
	}
}

func TestValue(t *testing.T) {
	tests := []struct {
		filter string
		field  string
		want   string
		wantOK bool
	}{
		{``, "pool", "", false},
		{`pool = blue`, "pool", "blue", true},
		{`pool = ""`, "pool", "", true},
		{`owner = x AND pool = blue AND pool = red`, "pool", "blue", true},
		{`pool != blue AND pool = red`, "pool", "red", true},
		{`pool != blue`, "pool", "", false},
		{`pool:*`, "pool", "", false},
		{`owner = x`, "pool", "", false},
		{`labels.pool = x`, "pool", "", false},
		{`labels.app = x`, "labels", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.filter+"/"+tt.field, func(t *testing.T) {
			f, err := Parse(tt.filter, allocationFields()...)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.filter, err)
			}
			got, ok := f.Value(tt.field)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Value(%q) = %q, %v; want %q, %v", tt.field, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{``, ``},
		{`pool=blue`, `pool = "blue"`},
		{`  pool  !=  "blue"  `, `pool != "blue"`},
		{`sharing_key : *`, `sharing_key:*`},
		{`labels."app":*`, `labels.app:*`},
		{`labels."example.com/team"=a`, `labels.example.com/team = "a"`},
		{`owner = "a \"b\" \\ c"`, `owner = "a \"b\" \\ c"`},
		{`address=2001:db8::1 AND labels.x:*AND pool="a"`, `address = "2001:db8::1" AND labels.x:* AND pool = "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			f, err := Parse(tt.in, allocationFields()...)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			got := f.String()
			if got != tt.want {
				t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, tt.want)
			}
			again, err := Parse(got, allocationFields()...)
			if err != nil {
				t.Fatalf("Parse(%q) of the rendering: %v", got, err)
			}
			if diff := cmp.Diff(f, again); diff != "" {
				t.Errorf("rendering does not parse back (-first +again):\n%s", diff)
			}
		})
	}
}

func TestStringOfHandBuiltFilters(t *testing.T) {
	tests := []struct {
		f    Filter
		want string
	}{
		{Filter{Terms: []Term{{Field: "labels", Key: "a b", Op: Equal, Value: "x"}}}, `labels."a b" = "x"`},
		{Filter{Terms: []Term{{Field: "labels", Op: Has}}}, `labels."":*`},
		{Filter{Terms: []Term{{Field: "pool", Value: "x"}}}, `pool Op(0) "x"`},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.f, got, tt.want)
		}
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[Op]string{Equal: "=", NotEqual: "!=", Has: ":", 0: "Op(0)", 4: "Op(4)"} {
		if got := op.String(); got != want {
			t.Errorf("Op(%d).String() = %q, want %q", int(op), got, want)
		}
	}
}

// TestStringMayExceedMaxLength documents that the canonical rendering adds
// quotes and spaces, so a filter close to MaxLength may render to text that
// Parse rejects as too long, although it is otherwise the same filter.
func TestStringMayExceedMaxLength(t *testing.T) {
	in := strings.TrimSuffix(strings.Repeat("pool="+strings.Repeat("x", 54)+" AND ", MaxTerms), " AND ")
	if len(in) > MaxLength {
		t.Fatalf("test input is %d bytes, want at most %d", len(in), MaxLength)
	}
	f, err := Parse(in, "pool")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	rendered := f.String()
	if len(rendered) <= MaxLength {
		t.Fatalf("rendering is %d bytes, want more than %d", len(rendered), MaxLength)
	}
	if _, err := Parse(rendered, "pool"); err == nil {
		t.Errorf("Parse of a %d-byte rendering succeeded, want a length error", len(rendered))
	}
	again, err := parse(rendered, []string{"pool"})
	if err != nil {
		t.Fatalf("parse without the length limit: %v", err)
	}
	if diff := cmp.Diff(f, again); diff != "" {
		t.Errorf("rendering parses differently (-first +again):\n%s", diff)
	}
}
