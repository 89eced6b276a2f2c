package selector

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"iter"
	"maps"
	"slices"
	"strings"
)

// Set is an immutable label set, held compactly: one string that encodes
// its keys and values in key order, each preceded by its length as a
// uvarint, behind one pointer. A replica keeps two label sets in each of
// its allocations, up to a million of them: a small Go map costs about 300
// bytes whatever it holds, where this costs 8 bytes in the allocation, 16
// for the string's header and the encoding's length (rounded up to Go's
// size classes), and the collector never scans the encoding. Copies share
// it; nothing writes it after the set is made. The zero Set is empty.
//
// In JSON a Set is an object, as a map[string]string is (keys in order).
type Set struct {
	enc *string // nil: no labels
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
	return encode(kv)
}

// NewSet returns the set of the labels given as alternating keys and values,
// e.g. NewSet("app", "web", "team", "a"). Of repeated keys, the last value
// wins; a key without a value has the empty value.
func NewSet(kv ...string) Set {
	if len(kv)%2 == 1 {
		kv = append(slices.Clip(kv), "")
	}
	sorted := true
	for i := 2; i < len(kv) && sorted; i += 2 {
		sorted = kv[i-2] < kv[i]
	}
	if sorted { // the common case: a set's own pairs, or a literal in order
		return encode(kv)
	}
	m := make(map[string]string, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return SetOf(m)
}

// encode returns the set of kv's pairs, whose keys are in order and unique.
func encode(kv []string) Set {
	if len(kv) == 0 {
		return Set{}
	}
	n := 0
	for _, s := range kv {
		n += uvarintLen(len(s)) + len(s)
	}
	var b strings.Builder
	b.Grow(n)
	var lenBuf [binary.MaxVarintLen64]byte
	for _, s := range kv {
		b.Write(binary.AppendUvarint(lenBuf[:0], uint64(len(s))))
		b.WriteString(s)
	}
	enc := b.String()
	return Set{enc: &enc}
}

func uvarintLen(n int) int {
	w := 1
	for ; n >= 0x80; n >>= 7 {
		w++
	}
	return w
}

// next splits the first string off an encoding. A malformed encoding (which
// encode never makes) ends it.
func next(enc string) (s, rest string) {
	n, shift := 0, 0
	for i := 0; i < len(enc) && shift < 63; i, shift = i+1, shift+7 {
		c := enc[i]
		n |= int(c&0x7f) << shift
		if c < 0x80 {
			if n < 0 || n > len(enc)-i-1 {
				return "", ""
			}
			return enc[i+1 : i+1+n], enc[i+1+n:]
		}
	}
	return "", ""
}

func (s Set) encoding() string {
	if s.enc == nil {
		return ""
	}
	return *s.enc
}

// Len returns the number of labels.
func (s Set) Len() int {
	n := 0
	for range s.All() {
		n++
	}
	return n
}

// IsZero reports whether the set is empty (for JSON's omitzero).
func (s Set) IsZero() bool { return s.encoding() == "" }

// Get returns the value of the label key and whether the set has it.
func (s Set) Get(key string) (string, bool) {
	for k, v := range s.All() {
		if k >= key {
			return v, k == key
		}
	}
	return "", false
}

// All yields the labels in key order.
func (s Set) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		var k, v string
		for e := s.encoding(); e != ""; {
			k, e = next(e)
			v, e = next(e)
			if !yield(k, v) {
				return
			}
		}
	}
}

// Map returns the labels as a new map, or nil if there are none.
func (s Set) Map() map[string]string {
	if s.IsZero() {
		return nil
	}
	m := make(map[string]string)
	for k, v := range s.All() {
		m[k] = v
	}
	return m
}

// Key returns a string that equal sets, and only they, share (the set's
// encoding), for use as a map key.
func (s Set) Key() string { return s.encoding() }

// Equal reports whether s and o hold the same labels.
func (s Set) Equal(o Set) bool { return s.encoding() == o.encoding() }

// MarshalJSON encodes the set as a JSON object, as encoding/json encodes the
// equal map.
func (s Set) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for k, v := range s.All() {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		for i, str := range [2]string{k, v} {
			enc, err := json.Marshal(str)
			if err != nil {
				return nil, err
			}
			b.Write(enc)
			if i == 0 {
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
