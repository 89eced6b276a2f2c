package store

import (
	"maps"
	"net/netip"
	"reflect"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// Interning changes no value, and equal strings of two objects end up
// sharing one copy.
func TestInternSharesStrings(t *testing.T) {
	raw := []string{
		`{"tenant":"t1","id":"a1","owner":"ns/svc-1","namespace":"ns","ownerLabels":{"app":"web"},"pool":"p","addrs":["2001:db8::1"],"created":{"auditID":"x1","actor":"spiffe://beacon/adapter/t1"}}`,
		`{"tenant":"t1","id":"a2","owner":"ns/svc-2","namespace":"ns","ownerLabels":{"app":"web"},"pool":"p","addrs":["2001:db8::2"],"created":{"auditID":"x2","actor":"spiffe://beacon/adapter/t1"}}`,
	}
	in := newInterner()
	var got []*ipam.Allocation
	for _, r := range raw {
		v, err := decode(ipam.KindAllocation, []byte(r))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := decode(ipam.KindAllocation, []byte(r))
		in.value(v)
		if diff := cmp.Diff(want, v, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
			t.Errorf("interning changed the value: -want +got\n%s", diff)
		}
		got = append(got, v.(*ipam.Allocation))
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	for _, tc := range []struct {
		field string
		a, b  string
	}{
		{"tenant", got[0].Tenant, got[1].Tenant},
		{"namespace", got[0].Namespace, got[1].Namespace},
		{"pool", got[0].Pool, got[1].Pool},
		{"label value", label(got[0], "app"), label(got[1], "app")},
		{"actor", got[0].Created.Actor, got[1].Created.Actor},
	} {
		if !same(tc.a, tc.b) {
			t.Errorf("%s: two copies of %q", tc.field, tc.a)
		}
	}
}

// Equal label sets share one set's storage; different ones, however their
// strings run together, do not.
func TestInternSharesLabelSets(t *testing.T) {
	in := newInterner()
	sets := []map[string]string{
		{"app": "web", "team": "a"},
		{"team": "a", "app": "web"},
		{"app": "webteam", "": "a"},
		{"a": "bc"},
		{"ab": "c"},
		{"app": "web"},
	}
	got := make([]selector.Set, len(sets))
	for i, m := range sets {
		got[i] = in.labelSet(selector.SetOf(m))
		if diff := cmp.Diff(m, got[i].Map()); diff != "" {
			t.Errorf("set %d changed: -want +got\n%s", i, diff)
		}
	}
	// The set's storage, read through reflect: Set keeps it unexported.
	ptr := func(s selector.Set) uintptr { return reflect.ValueOf(s).Field(0).Pointer() }
	for i := range got {
		for j := range i {
			if shared, want := ptr(got[i]) == ptr(got[j]), maps.Equal(sets[i], sets[j]); shared != want {
				t.Errorf("sets %d and %d (%v, %v): shared %v, want %v", j, i, sets[j], sets[i], shared, want)
			}
		}
	}
	if s := in.labelSet(selector.Set{}); !s.IsZero() {
		t.Errorf("labelSet(empty) = %v, want empty", s)
	}
}

// label returns a's owner label key.
func label(a *ipam.Allocation, key string) string {
	v, _ := a.OwnerLabels.Get(key)
	return v
}
