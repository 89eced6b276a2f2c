package selector

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidate(t *testing.T) {
	long63 := strings.Repeat("a", 63)
	long64 := strings.Repeat("a", 64)
	prefix253 := strings.Repeat("a", 61) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 63)
	tests := []struct {
		name string
		sel  Selector
		want *FieldError // nil: valid
	}{
		{"empty", Selector{}, nil},
		{
			"good",
			Selector{
				MatchLabels: map[string]string{"app": "web", "example.com/tier": "", "A.b-c_D": long63},
				Expressions: []Requirement{
					{Key: "app.kubernetes.io/name", Operator: In, Values: []string{"a", "b"}},
					{Key: "zone", Operator: NotIn, Values: []string{""}},
					{Key: "x", Operator: Exists},
					{Key: "y", Operator: DoesNotExist, Values: []string{}},
					{Key: prefix253 + "/" + long63, Operator: Exists},
				},
			},
			nil,
		},
		{
			"empty key in match_labels",
			Selector{MatchLabels: map[string]string{"": "x"}},
			&FieldError{Field: "match_labels[]", Reason: "invalid key: must not be empty"},
		},
		{
			"bad value in match_labels",
			Selector{MatchLabels: map[string]string{"app": "web!"}},
			&FieldError{Field: "match_labels[app]", Reason: `invalid value "web!": must be empty or consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric`},
		},
		{
			"value too long in match_labels",
			Selector{MatchLabels: map[string]string{"app": long64}},
			&FieldError{Field: "match_labels[app]", Reason: `invalid value "` + long64 + `": must be at most 63 characters`},
		},
		{
			"first bad key in key order",
			Selector{MatchLabels: map[string]string{"b-": "x", "a-": "x", "c": "x"}},
			&FieldError{Field: "match_labels[a-]", Reason: "invalid key: name must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"},
		},
		{
			"match_labels before expressions",
			Selector{MatchLabels: map[string]string{"-": "x"}, Expressions: []Requirement{{Key: "a"}}},
			&FieldError{Field: "match_labels[-]", Reason: "invalid key: name must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric"},
		},
		{
			"In without values",
			Selector{Expressions: []Requirement{{Key: "a", Operator: Exists}, {Key: "b", Operator: Exists}, {Key: "c", Operator: In}}},
			&FieldError{Field: "match_expressions[2].values", Reason: "must not be empty for operator In"},
		},
		{
			"NotIn without values",
			expr("c", NotIn),
			&FieldError{Field: "match_expressions[0].values", Reason: "must not be empty for operator NotIn"},
		},
		{
			"Exists with values",
			expr("c", Exists, "x"),
			&FieldError{Field: "match_expressions[0].values", Reason: "must be empty for operator Exists"},
		},
		{
			"DoesNotExist with values",
			expr("c", DoesNotExist, ""),
			&FieldError{Field: "match_expressions[0].values", Reason: "must be empty for operator DoesNotExist"},
		},
		{
			"operator unset",
			expr("c", 0),
			&FieldError{Field: "match_expressions[0].operator", Reason: "must be set"},
		},
		{
			"operator unknown",
			expr("c", 5),
			&FieldError{Field: "match_expressions[0].operator", Reason: "unknown operator 5"},
		},
		{
			"bad value in expression",
			expr("c", In, "ok", "not ok"),
			&FieldError{Field: "match_expressions[0].values[1]", Reason: `invalid value "not ok": must be empty or consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric`},
		},
		{
			"key checked before operator",
			expr("", 0),
			&FieldError{Field: "match_expressions[0].key", Reason: `invalid key "": must not be empty`},
		},
		{
			"two slashes",
			expr("a/b/c", Exists),
			&FieldError{Field: "match_expressions[0].key", Reason: `invalid key "a/b/c": must be a name, optionally prefixed by a DNS subdomain and "/"`},
		},
		{
			"empty prefix",
			expr("/name", Exists),
			&FieldError{Field: "match_expressions[0].key", Reason: `invalid key "/name": prefix before "/" must not be empty`},
		},
		{
			"empty name after prefix",
			expr("example.com/", Exists),
			&FieldError{Field: "match_expressions[0].key", Reason: `invalid key "example.com/": name must not be empty`},
		},
		{
			"upper-case prefix",
			expr("Example.com/name", Exists),
			&FieldError{Field: "match_expressions[0].key", Reason: `invalid key "Example.com/name": prefix must be a lowercase DNS subdomain such as example.com`},
		},
		{
			"prefix with empty label",
			expr("example..com/name", Exists),
			&FieldError{Field: "match_expressions[0].key", Reason: `invalid key "example..com/name": prefix must be a lowercase DNS subdomain such as example.com`},
		},
		{
			"prefix label ends with hyphen",
			expr("example-.com/name", Exists),
			&FieldError{Field: "match_expressions[0].key", Reason: `invalid key "example-.com/name": prefix must be a lowercase DNS subdomain such as example.com`},
		},
		{
			"prefix too long",
			expr("a"+prefix253+"/name", Exists),
			&FieldError{Field: "match_expressions[0].key", Reason: `invalid key "a` + prefix253 + `/name": prefix must be at most 253 characters`},
		},
		{
			"name too long",
			expr(long64, Exists),
			&FieldError{Field: "match_expressions[0].key", Reason: `invalid key "` + long64 + `": name must be at most 63 characters`},
		},
		{
			"name with non-ASCII",
			expr("café", Exists),
			&FieldError{Field: "match_expressions[0].key", Reason: `invalid key "café": name must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.sel.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate() = %v (%T), want *FieldError", err, err)
			}
			if diff := cmp.Diff(tt.want, fe); diff != "" {
				t.Errorf("Validate() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateLabels(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   *FieldError
	}{
		{"nil", nil, nil},
		{"good", map[string]string{"app": "web", "beacon.example/owner": "", "z": "1.2_3-x"}, nil},
		{"bad key", map[string]string{"ok": "1", "bad key": "1"}, &FieldError{
			Field:  "labels[bad key]",
			Reason: "invalid key: name must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric",
		}},
		{"bad value", map[string]string{"app": "-web"}, &FieldError{
			Field:  "labels[app]",
			Reason: `invalid value "-web": must be empty or consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateLabels(tt.labels)
			var got *FieldError
			if err != nil && !errors.As(err, &got) {
				t.Fatalf("ValidateLabels() = %v (%T), want *FieldError", err, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ValidateLabels() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFieldErrorError(t *testing.T) {
	err := Selector{MatchLabels: map[string]string{"app": "a b"}}.Validate()
	want := `selector: match_labels[app]: invalid value "a b": must be empty or consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric`
	if err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %s", err, want)
	}
}
