package metallb

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

// unstructured decodes JSON as the API server's unstructured objects hold
// it: whole numbers as int64, other numbers as float64.
func unstructured(b []byte) (map[string]any, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if d.Decode(&m) != nil || m == nil {
		return nil, false
	}
	var conv func(v any) any
	conv = func(v any) any {
		switch x := v.(type) {
		case json.Number:
			if n, err := x.Int64(); err == nil {
				return n
			}
			f, _ := x.Float64()
			return f
		case map[string]any:
			for k, e := range x {
				x[k] = conv(e)
			}
		case []any:
			for i, e := range x {
				x[i] = conv(e)
			}
		}
		return v
	}
	conv(m)
	return m, true
}

// FuzzMetalLBSpec converts an arbitrary spec (JSON, decoded as the API
// server's unstructured objects) as each MetalLB kind: IPAddressPool,
// L2Advertisement, BGPAdvertisement, BGPPeer, BFDProfile and Community.
// Nothing panics; a refusal is a *SpecError whose every problem names a
// field under spec; a conversion is deterministic, and the names it makes
// are IPAM IDs of the tenant's own (mlb-) resources and pools.
func FuzzMetalLBSpec(f *testing.F) {
	const tenant = "c1"
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		spec, ok := unstructured(b)
		if !ok {
			return
		}
		o := Object{Namespace: "metallb-system", Name: "x", Labels: map[string]string{"a": "b"}, Spec: spec}
		lookup := func(ns, name string) (string, error) {
			if name == "missing" {
				return "", errors.New("no such Secret")
			}
			return "pw-" + ns + "/" + name, nil
		}
		conv := func() (proto.Message, error) {
			switch kind % 6 {
			case 0:
				return Pool(tenant, o)
			case 1:
				return L2Advertisement(tenant, o)
			case 2:
				return BGPAdvertisement(tenant, o)
			case 3:
				p, _, err := BGPPeer(o, lookup)
				return p, err
			case 4:
				return BFDProfile(o)
			default:
				return Community(o)
			}
		}
		m, err := conv()
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) || len(se.Problems) == 0 {
				t.Fatalf("kind %d: error %#v, want a *SpecError", kind%6, err)
			}
			for _, p := range se.Problems {
				path, reason, ok := strings.Cut(p, ": ")
				if !ok || !strings.HasPrefix(path, "spec.") || reason == "" {
					t.Fatalf("kind %d: problem %q does not name a spec field", kind%6, p)
				}
			}
			return
		}
		again, err := conv()
		if err != nil || !proto.Equal(m, again) {
			t.Fatalf("kind %d: not deterministic: %v, then %v, %v", kind%6, m, again, err)
		}
		checkNames(t, m)
	})
}

// checkNames checks the references a converted resource makes.
func checkNames(t *testing.T, m proto.Message) {
	t.Helper()
	type withPools interface{ GetPools() []string }
	if p, ok := m.(withPools); ok {
		for _, n := range p.GetPools() {
			if id, ok := strings.CutPrefix(n, "pools/"); !ok || !validID(id) {
				t.Fatalf("pool reference %q", n)
			}
		}
	}
	type withPeers interface{ GetPeers() []string }
	if p, ok := m.(withPeers); ok {
		for _, id := range p.GetPeers() {
			if !validID(id) || !strings.HasPrefix(id, ResourcePrefix) {
				t.Fatalf("peer reference %q", id)
			}
		}
	}
	type withBFD interface{ GetBfdProfile() string }
	if p, ok := m.(withBFD); ok && p.GetBfdProfile() != "" && (!validID(p.GetBfdProfile()) || !strings.HasPrefix(p.GetBfdProfile(), ResourcePrefix)) {
		t.Fatalf("BFD profile reference %q", p.GetBfdProfile())
	}
	type withRanges interface{ GetRanges() []string }
	if p, ok := m.(withRanges); ok {
		for _, r := range p.GetRanges() {
			if strings.Contains(r, " ") {
				t.Fatalf("range %q keeps a space", r)
			}
		}
	}
}

// FuzzMetalLBNumber checks how a number field is read: a whole number in
// range is taken exactly, anything else (fractions, NaN, infinities, out
// of range, other types) is refused with the field's path.
func FuzzMetalLBNumber(f *testing.F) {
	f.Fuzz(func(t *testing.T, x float64, asInt bool, lo, hi int64) {
		var v any = x
		if asInt {
			v = int64(x)
		}
		var r reader
		n, set := r.integer(map[string]any{"k": v}, "spec", "k", lo, hi)
		if set {
			if len(r.errs) > 0 || n < lo || n > hi {
				t.Fatalf("integer(%v) in [%d, %d] = %d with problems %v", v, lo, hi, n, r.errs)
			}
			if !asInt && float64(n) != x || asInt && n != v.(int64) {
				t.Fatalf("integer(%v) = %d, not the number given", v, n)
			}
			return
		}
		if len(r.errs) != 1 || !strings.HasPrefix(r.errs[0], "spec.k: ") {
			t.Fatalf("integer(%v) in [%d, %d] refused with problems %v", v, lo, hi, r.errs)
		}
		if !asInt && x == math.Trunc(x) && x >= -1<<62 && x <= 1<<62 && int64(x) >= lo && int64(x) <= hi {
			t.Fatalf("integer(%v) in [%d, %d] refused a whole number in range: %v", v, lo, hi, r.errs)
		}
	})
}

// FuzzResourceID checks the IDs the adapter gives MetalLB resources (for a
// valid tenant, as the adapter's --tenant must be): always valid IPAM IDs; the readable form ("mlb-NAME", "TENANT-NAME") whenever it
// is valid; two names of one tenant's namespace never share an ID.
func FuzzResourceID(f *testing.F) {
	f.Fuzz(func(t *testing.T, tenant, name, other string) {
		if tenant == "" || !validID("t"+tenant[1:]) || (tenant[0] < 'a' || tenant[0] > 'z') && (tenant[0] < '0' || tenant[0] > '9') {
			return // k8s-adapter refuses to start with such a --tenant
		}
		for _, id := range []string{ResourceID("ns", name), PoolID(tenant, "ns", name)} {
			if !validID(id) {
				t.Fatalf("ID %q for tenant %q, name %q is not valid", id, tenant, name)
			}
		}
		if validID(ResourcePrefix+name) && ResourceID("ns", name) != ResourcePrefix+name {
			t.Fatalf("ResourceID(%q) = %q", name, ResourceID("ns", name))
		}
		if validID(tenant+"-"+name) && PoolID(tenant, "ns", name) != tenant+"-"+name {
			t.Fatalf("PoolID(%q, %q) = %q", tenant, name, PoolID(tenant, "ns", name))
		}
		if name != other {
			if ResourceID("ns", name) == ResourceID("ns", other) {
				t.Fatalf("names %q and %q share the ID %q", name, other, ResourceID("ns", name))
			}
			if PoolID(tenant, "ns", name) == PoolID(tenant, "ns", other) {
				t.Fatalf("pools %q and %q of tenant %q share the ID %q", name, other, tenant, PoolID(tenant, "ns", name))
			}
		}
	})
}
