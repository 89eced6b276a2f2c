package addrspace

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReservedIn(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // the block's name, "" for none
	}{
		{"192.0.2.0/24", ""},
		{"2001:db8::/64", ""},
		{"0.0.0.0/0", `"this network"`},
		{"1.0.0.0-127.0.0.1", "loopback"},
		{"126.255.255.255-127.0.0.0", "loopback"},
		{"128.0.0.0-169.254.0.0", "link-local"},
		{"223.255.255.0/24", ""},
		{"224.0.0.0/24", "multicast"},
		{"240.0.0.0/5", ""},
		{"255.255.255.254-255.255.255.255", "limited broadcast"},
		{"::-::1", "unspecified"},
		{"::2-::fffe:ffff:ffff", ""},
		{"::fffe:ffff:ffff-::1:0:0:0", "IPv4-mapped"},
		{"fe80::1", "link-local"},
		{"fec0::/10", ""},
		{"ff02::1", "multicast"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			b, _ := ReservedIn(mustRange(t, tc.in))
			if diff := cmp.Diff(tc.want, b.Name); diff != "" {
				t.Errorf("block (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBlocks24(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want uint64
	}{
		{[]string{"192.0.2.7"}, 1},
		{[]string{"192.0.2.255-192.0.3.0"}, 2},
		{[]string{"10.0.0.0/8", "2001:db8::/32"}, 1 << 16},
		{[]string{"0.0.0.0/0"}, 1 << 24},
	} {
		var rs []Range
		for _, s := range tc.in {
			rs = append(rs, mustRange(t, s))
		}
		if got := Blocks24(rs); got != tc.want {
			t.Errorf("Blocks24(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
