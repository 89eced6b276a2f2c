package localaddr_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/beaconlb/beacon/services/announcer/internal/localaddr"
)

func TestDiff(t *testing.T) {
	a, b, c := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("2001:db8::1")
	tests := []struct {
		name        string
		have        map[netip.Addr]bool
		want        []netip.Addr
		add, remove []netip.Addr
	}{
		{name: "empty"},
		{name: "all new", want: []netip.Addr{a, c}, add: []netip.Addr{a, c}},
		{name: "all gone", have: map[netip.Addr]bool{b: true, a: true}, remove: []netip.Addr{a, b}},
		{name: "some of each", have: map[netip.Addr]bool{a: true, b: true}, want: []netip.Addr{b, c}, add: []netip.Addr{c}, remove: []netip.Addr{a}},
		{name: "unchanged", have: map[netip.Addr]bool{a: true}, want: []netip.Addr{a}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			add, remove := localaddr.Diff(tt.have, tt.want)
			opts := []cmp.Option{cmp.Comparer(func(x, y netip.Addr) bool { return x == y }), cmpopts.EquateEmpty()}
			if diff := cmp.Diff(tt.add, add, opts...); diff != "" {
				t.Errorf("add (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.remove, remove, opts...); diff != "" {
				t.Errorf("remove (-want +got):\n%s", diff)
			}
		})
	}
}
