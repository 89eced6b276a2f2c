package selector

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSet(t *testing.T) {
	long := strings.Repeat("a", 253) + "/" + strings.Repeat("b", 63)
	tests := []struct {
		name    string
		set     Set
		want    map[string]string
		wantLen int
	}{
		{"zero", Set{}, nil, 0},
		{"of nil map", SetOf(nil), nil, 0},
		{"of map", SetOf(map[string]string{"team": "a", "app": "web"}), map[string]string{"app": "web", "team": "a"}, 2},
		{"pairs in order", NewSet("app", "web", "team", "a"), map[string]string{"app": "web", "team": "a"}, 2},
		{"pairs out of order", NewSet("team", "a", "app", "web"), map[string]string{"app": "web", "team": "a"}, 2},
		{"repeated key: last wins", NewSet("app", "web", "app", "db"), map[string]string{"app": "db"}, 1},
		{"key without value", NewSet("app"), map[string]string{"app": ""}, 1},
		{"empty value", NewSet("app", ""), map[string]string{"app": ""}, 1},
		{"long key and value (two-byte lengths)", NewSet(long, long[:200], "b", "c"), map[string]string{long: long[:200], "b": "c"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.set.Map()); diff != "" {
				t.Errorf("Map(): -want +got\n%s", diff)
			}
			if got := len(tt.set.Map()); got != tt.wantLen {
				t.Errorf("%d labels, want %d", got, tt.wantLen)
			}
			if got := tt.set.IsZero(); got != (tt.wantLen == 0) {
				t.Errorf("IsZero() = %v with %d labels", got, tt.wantLen)
			}
			var keys []string
			for k, v := range tt.set.All() {
				keys = append(keys, k)
				if got, ok := tt.set.Get(k); !ok || got != v {
					t.Errorf("Get(%q) = %q, %v; All() yields %q", k, got, ok, v)
				}
			}
			if !slices.IsSorted(keys) {
				t.Errorf("All() yields keys %q, not in order", keys)
			}
			if got, ok := tt.set.Get("missing"); ok {
				t.Errorf("Get(missing) = %q, true", got)
			}
			if !tt.set.Equal(SetOf(tt.want)) {
				t.Errorf("%v is not Equal to SetOf(%v)", tt.set, tt.want)
			}
		})
	}
}

// NewSet copies its arguments: a caller's slice changing later does not
// change the set.
func TestNewSetCopies(t *testing.T) {
	kv := []string{"app", "web"}
	s := NewSet(kv...)
	kv[1] = "db"
	if got, _ := s.Get("app"); got != "web" {
		t.Errorf("Get(app) = %q after the caller's slice changed, want web", got)
	}
}

// A Set reads and writes the JSON of the equal map, byte for byte, so that
// what a replica stored as a map reads back the same, and the other way.
func TestSetJSONIsTheMapsJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "app", "team", "", "<&>", "é", `"`, `\`, "x/y", "\u2028", "\x7f"}
	pick := func() string { return alphabet[rng.IntN(len(alphabet))] + alphabet[rng.IntN(len(alphabet))] }
	var prev map[string]string
	for i := range 2000 {
		m := map[string]string{}
		for range rng.IntN(6) {
			m[pick()] = pick()
		}
		if sameKey, want := SetOf(m).Key() == SetOf(prev).Key(), maps.Equal(m, prev); sameKey != want {
			t.Fatalf("case %d: %v and %v share a key: %v, want %v", i, m, prev, sameKey, want)
		}
		prev = m
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(SetOf(m))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("case %d: Set encodes %s, the map %s", i, got, want)
		}
		var back Set
		if err := json.Unmarshal(want, &back); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(back.Map(), m) {
			t.Fatalf("case %d: %s decodes to %v, want %v", i, want, back.Map(), m)
		}
	}
}

func TestSetJSONInAStruct(t *testing.T) {
	type obj struct {
		Labels Set `json:"labels,omitzero"`
	}
	for _, tc := range []struct{ in, want string }{
		{`{}`, `{}`},
		{`{"labels":null}`, `{}`},
		{`{"labels":{}}`, `{}`},
		{`{"labels":{"b":"2","a":"1"}}`, `{"labels":{"a":"1","b":"2"}}`},
	} {
		var o obj
		if err := json.Unmarshal([]byte(tc.in), &o); err != nil {
			t.Fatalf("Unmarshal(%s): %v", tc.in, err)
		}
		got, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("%s reads and writes as %s, want %s", tc.in, got, tc.want)
		}
	}
	var o obj
	if err := json.Unmarshal([]byte(`{"labels":["a"]}`), &o); err == nil {
		t.Errorf("a list of labels decoded without an error: %v", o.Labels)
	}
}

// AnyMatchesSet agrees with Matches (of one selector) and AnyMatches on
// the equal map, for random selectors and label sets.
func TestMatchesSetIsMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	keys, values := []string{"app", "team", "zone", "tier"}, []string{"a", "b", ""}
	labels := func() map[string]string {
		m := map[string]string{}
		for _, k := range keys {
			if rng.IntN(2) == 0 {
				m[k] = values[rng.IntN(len(values))]
			}
		}
		return m
	}
	selector := func() Selector {
		s := Selector{MatchLabels: map[string]string{}}
		for k, v := range labels() {
			if rng.IntN(3) == 0 {
				s.MatchLabels[k] = v
			}
		}
		for range rng.IntN(3) {
			r := Requirement{Key: keys[rng.IntN(len(keys))], Operator: Operator(1 + rng.IntN(4))}
			if r.Operator == In || r.Operator == NotIn {
				r.Values = []string{values[rng.IntN(len(values))]}
			}
			s.Expressions = append(s.Expressions, r)
		}
		return s
	}
	for i := range 5000 {
		m := labels()
		sels := make([]Selector, rng.IntN(3))
		for j := range sels {
			sels[j] = selector()
		}
		for _, s := range sels {
			if got, want := AnyMatchesSet([]Selector{s}, SetOf(m)), s.Matches(m); got != want {
				t.Fatalf("case %d: %+v matches %v as a Set: %v, as a map: %v", i, s, m, got, want)
			}
		}
		if got, want := AnyMatchesSet(sels, SetOf(m)), AnyMatches(sels, m); got != want {
			t.Fatalf("case %d: AnyMatchesSet(%+v, %v) = %v, AnyMatches = %v", i, sels, m, got, want)
		}
	}
}

// FuzzSetJSON decodes b as a Set and as a map[string]string: both must fail
// or both succeed with the same labels, and the Set must encode as the map
// does. The Set's own decoder (for objects as it writes them) and
// encoding/json's (for the rest) must agree on every input.
func FuzzSetJSON(f *testing.F) {
	for _, seed := range []string{`{}`, `null`, `{"a":"1","b":"2"}`, `{"b":"2","a":"1"}`, `{"a":"1","a":"2"}`,
		`{"a":"\u00e9"}`, `{ "a" : "1" , "b":"" }`, `{"a":1}`, `["a"]`, `{"a":"1",}`, `{"a\"b":"c"}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m map[string]string
		errMap := json.Unmarshal(b, &m)
		var s Set
		errSet := json.Unmarshal(b, &s)
		if (errMap == nil) != (errSet == nil) {
			t.Fatalf("%q: as a map: %v; as a Set: %v", b, errMap, errSet)
		}
		if errMap != nil {
			return
		}
		if !maps.Equal(s.Map(), m) {
			t.Fatalf("%q: Set %v, map %v", b, s.Map(), m)
		}
		if m == nil {
			m = map[string]string{} // null: a nil map encodes as null, the empty set as {}
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := json.Marshal(s); err != nil || string(got) != string(want) {
			t.Fatalf("%q: Set encodes %s (%v), the map %s", b, got, err, want)
		}
	})
}
