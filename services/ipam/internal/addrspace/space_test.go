package addrspace

import (
	"errors"
	"math/big"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go4.org/netipx"
)

func ipRanges(t testing.TB, ss ...string) []netipx.IPRange {
	t.Helper()
	out := make([]netipx.IPRange, len(ss))
	for i, s := range ss {
		out[i] = mustRange(t, s).IPRange()
	}
	return out
}

// rangeStrings formats ranges canonically, for readable diffs.
func rangeStrings(rs []netipx.IPRange) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = Range{From: r.From(), To: r.To()}.String()
	}
	return out
}

func TestNewSpace(t *testing.T) {
	tests := []struct {
		name         string
		ranges, excl []string
		avoidBuggy   bool
		want4, want6 []string
		size4, size6 *big.Int
		in, out      []string
	}{
		{
			name:  "empty",
			want4: []string{}, want6: []string{},
			size4: big.NewInt(0), size6: big.NewInt(0),
			out: []string{"192.0.2.1", "::"},
		},
		{
			name:   "v4 with exclusions",
			ranges: []string{"192.0.2.0/24"},
			excl:   []string{"192.0.2.0-192.0.2.9", "192.0.2.100", "198.51.100.0/24", "192.0.2.250-192.0.3.5"},
			want4:  []string{"192.0.2.10-192.0.2.99", "192.0.2.101-192.0.2.249"},
			want6:  []string{},
			size4:  big.NewInt(90 + 149), size6: big.NewInt(0),
			in:  []string{"192.0.2.10", "192.0.2.99", "192.0.2.101", "192.0.2.249"},
			out: []string{"192.0.2.9", "192.0.2.100", "192.0.2.250", "192.0.3.0", "::ffff:192.0.2.50"},
		},
		{
			name:   "exclusion covers all",
			ranges: []string{"192.0.2.0/24"},
			excl:   []string{"192.0.0.0/16"},
			want4:  []string{}, want6: []string{},
			size4: big.NewInt(0), size6: big.NewInt(0),
			out: []string{"192.0.2.1"},
		},
		{
			name:   "overlapping and touching ranges merge",
			ranges: []string{"192.0.2.0/25", "192.0.2.128/25", "192.0.2.10-192.0.2.20"},
			want4:  []string{"192.0.2.0/24"}, want6: []string{},
			size4: big.NewInt(256), size6: big.NewInt(0),
		},
		{
			name:   "mixed families",
			ranges: []string{"2001:db8::/64", "192.0.2.0/24", "2001:db8:1::/48"},
			excl:   []string{"2001:db8::/65", "192.0.2.0/25"},
			want4:  []string{"192.0.2.128/25"},
			want6:  []string{"2001:db8:0:0:8000::/65", "2001:db8:1::/48"},
			size4:  big.NewInt(128), size6: new(big.Int).Add(pow2(63), pow2(80)),
			in:  []string{"2001:db8::8000:0:0:0", "2001:db8:1:ffff:ffff:ffff:ffff:ffff", "192.0.2.128"},
			out: []string{"2001:db8::1", "192.0.2.127", "2001:db8:2::"},
		},
		{
			name:   "v6 /64 and /48 sizes",
			ranges: []string{"2001:db8::/64", "2001:db8:1::/48"},
			want4:  []string{},
			want6:  []string{"2001:db8::/64", "2001:db8:1::/48"},
			size4:  big.NewInt(0), size6: new(big.Int).Add(pow2(64), pow2(80)),
		},
		{
			name:   "whole v6 space",
			ranges: []string{"::/0"},
			want4:  []string{}, want6: []string{"::/0"},
			size4: big.NewInt(0), size6: pow2(128),
			in:  []string{"::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "::ffff:192.0.2.1"},
			out: []string{"192.0.2.1", "fe80::1%eth0"},
		},
		{
			name:       "avoid buggy on a /23",
			ranges:     []string{"192.0.2.0/23"},
			avoidBuggy: true,
			want4:      []string{"192.0.2.1-192.0.2.254", "192.0.3.1-192.0.3.254"},
			want6:      []string{},
			size4:      big.NewInt(2 * 254), size6: big.NewInt(0),
			in:  []string{"192.0.2.1", "192.0.2.254", "192.0.3.1"},
			out: []string{"192.0.2.0", "192.0.2.255", "192.0.3.0", "192.0.3.255"},
		},
		{
			name:       "avoid buggy on a range inside one /24",
			ranges:     []string{"192.0.2.10-192.0.2.20", "198.51.100.255", "203.0.113.0"},
			avoidBuggy: true,
			want4:      []string{"192.0.2.10-192.0.2.20"},
			want6:      []string{},
			size4:      big.NewInt(11), size6: big.NewInt(0),
		},
		{
			name:       "avoid buggy with exclusions and an unaligned range",
			ranges:     []string{"10.0.0.200-10.0.2.10", "2001:db8::/126"},
			excl:       []string{"10.0.1.0/25"},
			avoidBuggy: true,
			want4:      []string{"10.0.0.200-10.0.0.254", "10.0.1.128-10.0.1.254", "10.0.2.1-10.0.2.10"},
			want6:      []string{"2001:db8::/126"},
			size4:      big.NewInt(55 + 127 + 10), size6: big.NewInt(4),
		},
		{
			name:       "avoid buggy at the top of the v4 space",
			ranges:     []string{"255.255.254.250-255.255.255.255"},
			avoidBuggy: true,
			want4:      []string{"255.255.254.250-255.255.254.254", "255.255.255.1-255.255.255.254"},
			want6:      []string{},
			size4:      big.NewInt(5 + 254), size6: big.NewInt(0),
			out: []string{"255.255.255.255", "255.255.255.0"},
		},
		{
			name:       "avoid buggy at the bottom of the v4 space",
			ranges:     []string{"0.0.0.0-0.0.1.3"},
			avoidBuggy: true,
			want4:      []string{"0.0.0.1-0.0.0.254", "0.0.1.1-0.0.1.3"},
			want6:      []string{},
			size4:      big.NewInt(254 + 3), size6: big.NewInt(0),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSpace(parseRanges(t, tt.ranges...), parseRanges(t, tt.excl...), tt.avoidBuggy)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want4, rangeStrings(s.Ranges(true))); diff != "" {
				t.Errorf("v4 ranges (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want6, rangeStrings(s.Ranges(false))); diff != "" {
				t.Errorf("v6 ranges (-want +got):\n%s", diff)
			}
			if got := s.Size(true); got.Cmp(tt.size4) != 0 {
				t.Errorf("Size(v4) = %v, want %v", got, tt.size4)
			}
			if got := s.Size(false); got.Cmp(tt.size6) != 0 {
				t.Errorf("Size(v6) = %v, want %v", got, tt.size6)
			}
			if got, want := s.HasFamily(true), len(tt.want4) > 0; got != want {
				t.Errorf("HasFamily(v4) = %v, want %v", got, want)
			}
			if got, want := s.HasFamily(false), len(tt.want6) > 0; got != want {
				t.Errorf("HasFamily(v6) = %v, want %v", got, want)
			}
			for _, a := range tt.in {
				if !s.Contains(mustAddr(t, a)) {
					t.Errorf("Contains(%s) = false", a)
				}
			}
			for _, a := range tt.out {
				if s.Contains(mustAddr(t, a)) {
					t.Errorf("Contains(%s) = true", a)
				}
			}
			for _, is4 := range []bool{true, false} {
				f := s.FreeList(is4)
				if diff := cmp.Diff(rangeStrings(s.Ranges(is4)), rangeStrings(f.Ranges())); diff != "" {
					t.Errorf("FreeList(%v) ranges (-want +got):\n%s", is4, diff)
				}
				if got := f.Count(); got.Cmp(s.Size(is4)) != 0 {
					t.Errorf("FreeList(%v).Count() = %v, want %v", is4, got, s.Size(is4))
				}
				checkInvariants(t, f)
			}
		})
	}
}

func TestSpaceAvoidBuggyNeverContainsBuggy(t *testing.T) {
	s, err := NewSpace(parseRanges(t, "10.0.0.0/22", "10.0.8.7-10.0.9.3"), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, r := range s.Ranges(true) {
		for a := r.From(); a.Compare(r.To()) <= 0; a = a.Next() {
			if IsBuggy(a) {
				t.Fatalf("buggy address %s in space", a)
			}
			n++
		}
	}
	// 4 full /24s of 254, 10.0.8.7-.254 (248) and 10.0.9.1-.3 (3).
	if want := int64(4*254 + 248 + 3); n != want || s.Size(true).Int64() != want {
		t.Errorf("walked %d, Size %v, want %d", n, s.Size(true), want)
	}
	if got := s.FreeList(true).Fragments(); got != 6 {
		t.Errorf("Fragments = %d, want 6 (one per /24)", got)
	}
}

func TestSpaceAvoidBuggyLarge(t *testing.T) {
	// A /8 is 65,536 /24 blocks: built by range arithmetic, fast.
	s, err := NewSpace(parseRanges(t, "10.0.0.0/8"), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(s.Ranges(true)), 1<<16; got != want {
		t.Errorf("fragments = %d, want %d", got, want)
	}
	if got, want := s.Size(true).Int64(), int64(254<<16); got != want {
		t.Errorf("Size = %d, want %d", got, want)
	}
}

func TestZeroSpace(t *testing.T) {
	var s Space
	if s.HasFamily(true) || s.HasFamily(false) || s.Size(true).Sign() != 0 || s.Size(false).Sign() != 0 ||
		s.Contains(mustAddr(t, "192.0.2.1")) || len(s.Ranges(true)) != 0 || s.FreeList(false).Fragments() != 0 {
		t.Error("zero Space is not empty")
	}
}

func TestNewSpaceErrors(t *testing.T) {
	good := mustRange(t, "192.0.2.0/24")
	_, err := NewSpace([]Range{good, {From: good.To, To: good.From}}, nil, false)
	if !errors.Is(err, ErrInvalidRange) || !errors.Is(err, ErrReversed) {
		t.Errorf("NewSpace(reversed) = %v", err)
	}
}
