package selector

import (
	"slices"
	"strconv"
)

// Operator says how a Requirement's key and values relate. The zero value is
// not a valid operator.
type Operator int

const (
	// In holds when the label is present and its value is one of the values.
	In Operator = iota + 1
	// NotIn holds when the label is absent or its value is none of the values.
	NotIn
	// Exists holds when the label is present, whatever its value.
	Exists
	// DoesNotExist holds when the label is absent.
	DoesNotExist
)

// String returns the operator's Kubernetes spelling, e.g. "NotIn".
func (o Operator) String() string {
	switch o {
	case In:
		return "In"
	case NotIn:
		return "NotIn"
	case Exists:
		return "Exists"
	case DoesNotExist:
		return "DoesNotExist"
	}
	return "Operator(" + strconv.Itoa(int(o)) + ")"
}

// Requirement is one set-based term of a Selector: a label key, an operator
// and, for In and NotIn, the values.
type Requirement struct {
	// Key is the label key the requirement is about.
	Key string
	// Operator says how Key and Values relate.
	Operator Operator
	// Values are the values for In and NotIn; empty for the other operators.
	Values []string
}

// matches reports whether labels satisfy r. A requirement with an unknown
// operator matches nothing.
func (r Requirement) matches(labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Operator {
	case In:
		return ok && slices.Contains(r.Values, v)
	case NotIn:
		return !ok || !slices.Contains(r.Values, v)
	case Exists:
		return ok
	case DoesNotExist:
		return !ok
	}
	return false
}

// Selector selects label sets. Every MatchLabels entry and every expression
// must hold; the zero Selector matches everything.
type Selector struct {
	// MatchLabels are labels that must be present with exactly these values.
	MatchLabels map[string]string
	// Expressions are set-based requirements.
	Expressions []Requirement
}

// Matches reports whether labels satisfy every term of s. A nil labels map is
// an empty label set. Matches expects a selector that passed Validate; an
// expression with an unknown operator never holds.
func (s Selector) Matches(labels map[string]string) bool {
	for k, want := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != want {
			return false
		}
	}
	for _, r := range s.Expressions {
		if !r.matches(labels) {
			return false
		}
	}
	return true
}

// AnyMatches reports whether at least one of sels matches labels. An empty
// list matches everything, as an address pool's namespaceSelectors and
// serviceSelectors do in MetalLB.
func AnyMatches(sels []Selector, labels map[string]string) bool {
	if len(sels) == 0 {
		return true
	}
	for _, s := range sels {
		if s.Matches(labels) {
			return true
		}
	}
	return false
}
