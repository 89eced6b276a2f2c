package addrspace

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// addrCmp lets go-cmp compare netip.Addr values (unexported fields).
func addrCmp() cmp.Option { return cmp.Comparer(func(a, b netip.Addr) bool { return a == b }) }

func parseRanges(t testing.TB, ss ...string) []Range {
	t.Helper()
	out := make([]Range, len(ss))
	for i, s := range ss {
		out[i] = mustRange(t, s)
	}
	return out
}

func TestOverlap(t *testing.T) {
	tests := []struct {
		name string
		a, b []string
		want string // "" for no overlap
	}{
		{"empty", nil, nil, ""},
		{"one empty", []string{"192.0.2.0/24"}, nil, ""},
		{"disjoint", []string{"192.0.2.0/24"}, []string{"198.51.100.0/24"}, ""},
		{"adjacent is not overlap", []string{"192.0.2.0/25"}, []string{"192.0.2.128/25"}, ""},
		{"same", []string{"192.0.2.0/24"}, []string{"192.0.2.0/24"}, "192.0.2.0/24"},
		{"inside", []string{"192.0.2.0/24"}, []string{"192.0.2.10-192.0.2.20"}, "192.0.2.10-192.0.2.20"},
		{"edge", []string{"192.0.2.0/24"}, []string{"192.0.2.255-192.0.3.9"}, "192.0.2.255"},
		{"families differ", []string{"0.0.0.0/0"}, []string{"::/0"}, ""},
		{"v6", []string{"2001:db8::/48"}, []string{"2001:db8:0:5::/64", "fd00::/8"}, "2001:db8:0:5::/64"},
		{"v4 before v6", []string{"2001:db8::/64", "10.0.0.0/8"}, []string{"2001:db8::1", "10.9.9.9"}, "10.9.9.9"},
		{"lowest wins whatever the order",
			[]string{"198.51.100.0/24", "192.0.2.0/24"},
			[]string{"198.51.100.50", "192.0.2.99"}, "192.0.2.99"},
		{"touching ranges in one list merge",
			[]string{"192.0.2.0-192.0.2.9", "192.0.2.10-192.0.2.19"},
			[]string{"192.0.2.5-192.0.2.15"}, "192.0.2.5-192.0.2.15"},
		{"overlap ends at gap in other list",
			[]string{"192.0.2.0/24"},
			[]string{"192.0.2.5-192.0.2.9", "192.0.2.11-192.0.2.20"}, "192.0.2.5-192.0.2.9"},
		{"top of space", []string{"255.255.255.0/24"}, []string{"255.255.255.255"}, "255.255.255.255"},
		{"top of v6", []string{"::/0"}, []string{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fff0-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
			"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fff0/124"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := parseRanges(t, tt.a...), parseRanges(t, tt.b...)
			for _, swap := range []bool{false, true} {
				x, y := a, b
				if swap {
					x, y = b, a
				}
				got, ok := Overlap(x, y)
				if tt.want == "" {
					if ok {
						t.Errorf("Overlap = %v, want none", got)
					}
					continue
				}
				if !ok {
					t.Fatalf("Overlap: none, want %s", tt.want)
				}
				if diff := cmp.Diff(mustRange(t, tt.want), got, addrCmp()); diff != "" {
					t.Errorf("Overlap (swap=%v) mismatch (-want +got):\n%s", swap, diff)
				}
			}
		})
	}
}

func TestOverlapIgnoresInvalid(t *testing.T) {
	a := []Range{{}, {From: mustAddr(t, "192.0.2.9"), To: mustAddr(t, "192.0.2.1")}}
	b := []Range{mustRange(t, "0.0.0.0/0"), {}}
	if got, ok := Overlap(a, b); ok {
		t.Errorf("Overlap = %v, want none", got)
	}
	in := []Range{mustRange(t, "192.0.2.9"), mustRange(t, "192.0.2.1")}
	before := append([]Range(nil), in...)
	Overlap(in, in)
	if diff := cmp.Diff(before, in, addrCmp()); diff != "" {
		t.Errorf("Overlap modified its input (-before +after):\n%s", diff)
	}
}
