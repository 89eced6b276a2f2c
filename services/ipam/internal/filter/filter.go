package filter

import (
	"strconv"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// labelsField is the field name of terms on labels, written labels.KEY.
const labelsField = "labels"

// Op is how a term compares a field with its value. The zero value is not a
// valid Op.
type Op int

const (
	// Equal holds when the field is present and equals the value ("=").
	Equal Op = iota + 1
	// NotEqual holds when the field is missing or differs from the value ("!=").
	NotEqual
	// Has holds when the field is present and, unless it is a label, not
	// empty (":*").
	Has
)

// String returns the operator as written in a filter: "=", "!=" or ":".
func (o Op) String() string {
	switch o {
	case Equal:
		return "="
	case NotEqual:
		return "!="
	case Has:
		return ":"
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Term is one comparison of a filter.
type Term struct {
	// Field is the field compared: a plain field such as "pool", or "labels".
	Field string
	// Key is the label key when Field is "labels", and empty otherwise.
	Key string
	// Value is the value compared with, unquoted; empty for Has.
	Value string
	// Op is the comparison.
	Op Op
}

// Filter is a parsed filter: a conjunction of terms. The zero Filter matches
// everything.
type Filter struct {
	// Terms must all hold.
	Terms []Term
}

// Match reports whether every term holds for an object whose plain fields
// get returns and whose labels are labels. get reports a field's value and
// whether the object has the field; a nil get means the object has none.
//
// On a plain field, Equal and NotEqual compare the value exactly, and Has
// holds when the object has the field with a non-empty value (for proto3
// scalars, empty means unset). On a label, Has holds when the label is
// present, even with an empty value. NotEqual holds when the field or label
// is missing. A term with an invalid Op never holds.
func (f Filter) Match(get func(field string) (string, bool), labels selector.Set) bool {
	for _, t := range f.Terms {
		if !t.match(get, labels) {
			return false
		}
	}
	return true
}

func (t Term) match(get func(string) (string, bool), labels selector.Set) bool {
	var v string
	var ok bool
	switch {
	case t.Field == labelsField:
		v, ok = labels.Get(t.Key)
	case get != nil:
		v, ok = get(t.Field)
		if t.Op == Has {
			ok = ok && v != ""
		}
	}
	switch t.Op {
	case Equal:
		return ok && v == t.Value
	case NotEqual:
		return !ok || v != t.Value
	case Has:
		return ok
	}
	return false
}

// Value returns the value of the first Equal term on the plain field, so that
// a List method can narrow its scan with an index (e.g. for pool = "x")
// before calling Match. It reports false if there is no such term; it never
// reports terms on labels.
func (f Filter) Value(field string) (string, bool) {
	if field == labelsField {
		return "", false
	}
	for _, t := range f.Terms {
		if t.Op == Equal && t.Field == field {
			return t.Value, true
		}
	}
	return "", false
}

// String renders f canonically: terms joined by " AND ", each as
// `FIELD = "VALUE"`, `FIELD != "VALUE"` or `FIELD:*`, with label keys bare.
// Parsing the result gives f back, given the same fields, provided it is no
// longer than MaxLength (it can be longer than the text f was parsed from).
func (f Filter) String() string {
	var b strings.Builder
	for i, t := range f.Terms {
		if i > 0 {
			b.WriteString(" AND ")
		}
		t.writeTo(&b)
	}
	return b.String()
}

// String renders t canonically, as in Filter.String.
func (t Term) String() string {
	var b strings.Builder
	t.writeTo(&b)
	return b.String()
}

func (t Term) writeTo(b *strings.Builder) {
	b.WriteString(t.Field)
	if t.Field == labelsField {
		b.WriteByte('.')
		if isKey(t.Key) {
			b.WriteString(t.Key)
		} else {
			writeQuoted(b, t.Key)
		}
	}
	if t.Op == Has {
		b.WriteString(":*")
		return
	}
	b.WriteString(" " + t.Op.String() + " ")
	writeQuoted(b, t.Value)
}

// writeQuoted writes s as a double-quoted filter string.
func writeQuoted(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
}
