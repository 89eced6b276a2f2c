package store

import (
	"net/netip"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Interning changes no value, and equal strings of two objects end up
// sharing one copy.
func TestInternSharesStrings(t *testing.T) {
	raw := []string{
		`{"tenant":"t1","id":"a1","owner":"ns/svc-1","namespace":"ns","ownerLabels":{"app":"web"},"pool":"p","addrs":["2001:db8::1"],"created":{"auditID":"x1","actor":"spiffe://beacon/adapter/t1"}}`,
		`{"tenant":"t1","id":"a2","owner":"ns/svc-2","namespace":"ns","ownerLabels":{"app":"web"},"pool":"p","addrs":["2001:db8::2"],"created":{"auditID":"x2","actor":"spiffe://beacon/adapter/t1"}}`,
	}
	in := interner{}
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
		{"label value", got[0].OwnerLabels["app"], got[1].OwnerLabels["app"]},
		{"actor", got[0].Created.Actor, got[1].Created.Actor},
	} {
		if !same(tc.a, tc.b) {
			t.Errorf("%s: two copies of %q", tc.field, tc.a)
		}
	}
}
