package selector

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// reference holds the rules as the regular expressions Kubernetes uses in
// k8s.io/apimachinery/pkg/util/validation, to check the hand-written ones.
type reference struct {
	name, value, subdomain *regexp.Regexp
}

func newReference() reference {
	return reference{
		name:      regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`),
		value:     regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`),
		subdomain: regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`),
	}
}

func (r reference) keyValid(k string) bool {
	parts := strings.Split(k, "/")
	switch len(parts) {
	case 1:
		return len(k) <= 63 && r.name.MatchString(k)
	case 2:
		p, n := parts[0], parts[1]
		return p != "" && len(p) <= 253 && r.subdomain.MatchString(p) && len(n) <= 63 && r.name.MatchString(n)
	}
	return false
}

func (r reference) valueValid(v string) bool { return len(v) <= 63 && r.value.MatchString(v) }

// FuzzSelectorValidate builds a selector of one match_labels entry and one
// expression whose values are vals split at ",", or none if noValues. It
// checks that Validate and Matches never panic, that every error is a
// *FieldError naming the expected field, and that the key and value rules
// agree with the reference regular expressions.
func FuzzSelectorValidate(f *testing.F) {
	ref := newReference()
	f.Fuzz(func(t *testing.T, mlKey, mlValue, exKey string, op int, vals string, noValues bool) {
		var values []string
		if !noValues {
			values = strings.Split(vals, ",")
		}
		sel := Selector{
			MatchLabels: map[string]string{mlKey: mlValue},
			Expressions: []Requirement{{Key: exKey, Operator: Operator(op), Values: values}},
		}
		err := sel.Validate()
		sel.Matches(map[string]string{mlKey: mlValue, exKey: vals})
		sel.Matches(nil)

		lerr := ValidateLabels(map[string]string{mlKey: mlValue})
		if want := ref.keyValid(mlKey) && ref.valueValid(mlValue); (lerr == nil) != want {
			t.Fatalf("ValidateLabels({%q: %q}) = %v, reference says valid=%v", mlKey, mlValue, lerr, want)
		}
		if lerr != nil {
			var fe *FieldError
			if !errors.As(lerr, &fe) || fe.Field != "labels["+mlKey+"]" || fe.Reason == "" {
				t.Fatalf("ValidateLabels error %#v, want *FieldError for labels[%s]", lerr, mlKey)
			}
		}

		want := lerr == nil && ref.keyValid(exKey)
		switch o := Operator(op); o {
		case In, NotIn:
			want = want && len(values) > 0
		case Exists, DoesNotExist:
			want = want && len(values) == 0
		default:
			want = false
		}
		for _, v := range values {
			want = want && ref.valueValid(v)
		}
		if (err == nil) != want {
			t.Fatalf("Validate(%+v) = %v, reference says valid=%v", sel, err, want)
		}
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Reason == "" {
				t.Fatalf("Validate error %#v, want *FieldError with a reason", err)
			}
			if lerr == nil && !strings.HasPrefix(fe.Field, "match_expressions[0].") {
				t.Fatalf("Validate error names %q, want a field of match_expressions[0]", fe.Field)
			}
		}
	})
}
