package selector

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"iter"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
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
func encode[S ~string | ~[]byte](kv []S) Set {
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
		for i := range len(s) {
			b.WriteByte(s[i])
		}
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
// An object as MarshalJSON writes it (keys in order, no escapes) is encoded
// straight from b: a replica's load decodes a million of them. Any other
// goes through a map.
func (s *Set) UnmarshalJSON(b []byte) error {
	if set, ok := decodePlain(b); ok {
		*s = set
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*s = SetOf(m)
	return nil
}

// decodePlain decodes a JSON object whose keys are in order, unique, and
// whose keys and values are strings without escapes. It reports false for
// anything else, which it leaves to encoding/json.
func decodePlain(b []byte) (Set, bool) {
	var buf [16][]byte
	kv := buf[:0]
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return Set{}, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return Set{}, skipSpace(b, i+1) == len(b)
	}
	for {
		var k, v []byte
		var ok bool
		if k, i, ok = plainString(b, i); !ok {
			return Set{}, false
		}
		if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
			return Set{}, false
		}
		if v, i, ok = plainString(b, skipSpace(b, i+1)); !ok {
			return Set{}, false
		}
		if len(kv) > 0 && bytes.Compare(kv[len(kv)-2], k) >= 0 {
			return Set{}, false // out of order or repeated
		}
		kv = append(kv, k, v)
		if i = skipSpace(b, i); i >= len(b) {
			return Set{}, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			if skipSpace(b, i+1) != len(b) {
				return Set{}, false
			}
			return encode(kv), true
		default:
			return Set{}, false
		}
	}
}

// plainString reads the JSON string at b[i], which must hold no escape and
// no control character, and returns its contents and the index after it.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			if !utf8.Valid(b[i+1 : j]) {
				return nil, i, false // encoding/json replaces invalid bytes
			}
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, i, false
		}
	}
	return nil, i, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
