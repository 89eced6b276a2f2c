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

// holds reports whether r holds for a label set in which r.Key has value v
// (ok: the set has the key). A requirement with an unknown operator holds
// for nothing.
func (r Requirement) holds(v string, ok bool) bool {
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
func (s Selector) Matches(labels map[string]string) bool { return matches(s, mapLabels(labels)) }

// AnyMatches reports whether at least one of sels matches labels. An empty
// list matches everything, as an address pool's namespaceSelectors and
// serviceSelectors do in MetalLB.
func AnyMatches(sels []Selector, labels map[string]string) bool {
	return anyMatches(sels, mapLabels(labels))
}

// AnyMatchesSet reports whether at least one of sels matches labels, as
// AnyMatches does for a map.
func AnyMatchesSet(sels []Selector, labels Set) bool { return anyMatches(sels, labels) }

// labelGetter is a label set as the matching reads it: a map or a Set.
type labelGetter interface {
	Get(key string) (string, bool)
}

// mapLabels is a map read as a labelGetter.
type mapLabels map[string]string

func (m mapLabels) Get(key string) (string, bool) {
	v, ok := m[key]
	return v, ok
}

func matches[L labelGetter](s Selector, labels L) bool {
	for k, want := range s.MatchLabels {
		if got, ok := labels.Get(k); !ok || got != want {
			return false
		}
	}
	for _, r := range s.Expressions {
		if !r.holds(labels.Get(r.Key)) {
			return false
		}
	}
	return true
}

func anyMatches[L labelGetter](sels []Selector, labels L) bool {
	if len(sels) == 0 {
		return true
	}
	for _, s := range sels {
		if matches(s, labels) {
			return true
		}
	}
	return false
}
