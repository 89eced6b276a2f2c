package selector

import (
	"bytes"
	"encoding/json"
	"iter"
	"maps"
	"slices"
	"strings"
)

// Set is an immutable label set, held compactly: its keys and values in one
// slice, alternating, in key order. A replica keeps a label set in each of
// its allocations, up to a million of them; a small Go map costs about 300
// bytes whatever it holds, where a set of two labels costs 64. Copies share
// their storage, which nothing writes after the set is made. The zero Set is
// empty.
//
// In JSON a Set is an object, as a map[string]string is (keys in order).
type Set struct {
	kv []string
}

// SetOf returns the set of m's labels.
func SetOf(m map[string]string) Set {
	if len(m) == 0 {
		return Set{}
	}
	kv := make([]string, 0, 2*len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kv = append(kv, k, m[k])
	}
	return Set{kv: kv}
}

// NewSet returns the set of the labels given as alternating keys and values,
// e.g. NewSet("app", "web", "team", "a"). Of repeated keys, the last value
// wins; a key without a value has the empty value.
func NewSet(kv ...string) Set {
	if len(kv)%2 == 1 {
		kv = append(slices.Clip(kv), "")
	}
	if len(kv) == 0 {
		return Set{}
	}
	sorted := true
	for i := 2; i < len(kv) && sorted; i += 2 {
		sorted = kv[i-2] < kv[i]
	}
	if sorted { // the common case: a set's own pairs, or a literal in order
		return Set{kv: slices.Clone(kv)}
	}
	m := make(map[string]string, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return SetOf(m)
}

// Len returns the number of labels.
func (s Set) Len() int { return len(s.kv) / 2 }

// IsZero reports whether the set is empty (for JSON's omitzero).
func (s Set) IsZero() bool { return len(s.kv) == 0 }

// Get returns the value of the label key and whether the set has it.
func (s Set) Get(key string) (string, bool) {
	lo, hi := 0, len(s.kv)/2
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch c := strings.Compare(s.kv[2*m], key); {
		case c == 0:
			return s.kv[2*m+1], true
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return "", false
}

// All yields the labels in key order.
func (s Set) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for i := 0; i < len(s.kv); i += 2 {
			if !yield(s.kv[i], s.kv[i+1]) {
				return
			}
		}
	}
}

// Map returns the labels as a new map, or nil if there are none.
func (s Set) Map() map[string]string {
	if len(s.kv) == 0 {
		return nil
	}
	m := make(map[string]string, len(s.kv)/2)
	for k, v := range s.All() {
		m[k] = v
	}
	return m
}

// Equal reports whether s and o hold the same labels.
func (s Set) Equal(o Set) bool { return slices.Equal(s.kv, o.kv) }

// MarshalJSON encodes the set as a JSON object, as encoding/json encodes the
// equal map.
func (s Set) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i < len(s.kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		for j, str := range s.kv[i : i+2] {
			enc, err := json.Marshal(str)
			if err != nil {
				return nil, err
			}
			b.Write(enc)
			if j == 0 {
				b.WriteByte(':')
			}
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON decodes a JSON object of strings, or null (the empty set).
func (s *Set) UnmarshalJSON(b []byte) error {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*s = SetOf(m)
	return nil
}
