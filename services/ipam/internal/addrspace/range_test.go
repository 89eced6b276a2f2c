package addrspace

import (
	"errors"
	"math/big"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustAddr(t testing.TB, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustRange(t testing.TB, s string) Range {
	t.Helper()
	r, err := ParseRange(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func pow2(n uint) *big.Int { return new(big.Int).Lsh(big.NewInt(1), n) }

func TestParseRangeGood(t *testing.T) {
	tests := []struct {
		in, want, from, to string
		size               *big.Int
	}{
		{"192.0.2.0/24", "192.0.2.0/24", "192.0.2.0", "192.0.2.255", big.NewInt(256)},
		{"  192.0.2.0/24\t", "192.0.2.0/24", "192.0.2.0", "192.0.2.255", big.NewInt(256)},
		{"2001:db8::/64", "2001:db8::/64", "2001:db8::", "2001:db8::ffff:ffff:ffff:ffff", pow2(64)},
		{"2001:db8::/48", "2001:db8::/48", "2001:db8::", "2001:db8:0:ffff:ffff:ffff:ffff:ffff", pow2(80)},
		{"2001:DB8:0::0/64", "2001:db8::/64", "2001:db8::", "2001:db8::ffff:ffff:ffff:ffff", pow2(64)},
		{"198.51.100.10-198.51.100.20", "198.51.100.10-198.51.100.20", "198.51.100.10", "198.51.100.20", big.NewInt(11)},
		{"198.51.100.10 - 198.51.100.20", "198.51.100.10-198.51.100.20", "198.51.100.10", "198.51.100.20", big.NewInt(11)},
		{"198.51.100.10  -198.51.100.20", "198.51.100.10-198.51.100.20", "198.51.100.10", "198.51.100.20", big.NewInt(11)},
		{"192.0.2.0-192.0.2.255", "192.0.2.0/24", "192.0.2.0", "192.0.2.255", big.NewInt(256)},
		{"192.0.2.7", "192.0.2.7", "192.0.2.7", "192.0.2.7", big.NewInt(1)},
		{"192.0.2.7/32", "192.0.2.7", "192.0.2.7", "192.0.2.7", big.NewInt(1)},
		{"192.0.2.7-192.0.2.7", "192.0.2.7", "192.0.2.7", "192.0.2.7", big.NewInt(1)},
		{"2001:db8::1", "2001:db8::1", "2001:db8::1", "2001:db8::1", big.NewInt(1)},
		{"2001:db8::1-2001:db8::ff", "2001:db8::1-2001:db8::ff", "2001:db8::1", "2001:db8::ff", big.NewInt(255)},
		{"0.0.0.0/0", "0.0.0.0/0", "0.0.0.0", "255.255.255.255", pow2(32)},
		{"::/0", "::/0", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", pow2(128)},
		{"::-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "::/0", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", pow2(128)},
		{"255.255.255.255", "255.255.255.255", "255.255.255.255", "255.255.255.255", big.NewInt(1)},
		{"10.0.0.1-10.0.1.0", "10.0.0.1-10.0.1.0", "10.0.0.1", "10.0.1.0", big.NewInt(256)},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := ParseRange(tt.in)
			if err != nil {
				t.Fatalf("ParseRange(%q): %v", tt.in, err)
			}
			want := Range{From: mustAddr(t, tt.from), To: mustAddr(t, tt.to)}
			if diff := cmp.Diff(want, r, addrCmp()); diff != "" {
				t.Errorf("ParseRange(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
			if got := r.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if got := r.Size(); got.Cmp(tt.size) != 0 {
				t.Errorf("Size() = %v, want %v", got, tt.size)
			}
			again, err := ParseRange(r.String())
			if err != nil || again != r {
				t.Errorf("ParseRange(String()) = %v, %v; want %v", again, err, r)
			}
		})
	}
}

func TestParseRangeBad(t *testing.T) {
	tests := []struct {
		in         string
		sentinel   error
		reasonHas  string
		wantCauses bool
	}{
		{"", ErrEmpty, "empty", false},
		{"   ", ErrEmpty, "empty", false},
		{"192.0.2.1-2001:db8::1", ErrMixedFamily, "different address families", false},
		{"2001:db8::1 - 192.0.2.1", ErrMixedFamily, "different address families", false},
		{"192.0.2.20-192.0.2.10", ErrReversed, "start 192.0.2.20 is after end 192.0.2.10", false},
		{"fe80::1%eth0", ErrZone, "zoned", false},
		{"fe80::1%eth0-fe80::2%eth0", ErrZone, "zoned", false},
		{"fe80::/64%eth0", ErrZone, "zoned", false},
		{"::ffff:192.0.2.1", ErrMapped, "write 192.0.2.1", false},
		{"::ffff:192.0.2.1-::ffff:192.0.2.9", ErrMapped, "IPv4-mapped", false},
		{"::ffff:192.0.2.0/120", ErrMapped, "IPv4-mapped", false},
		{"192.0.2.1/24", ErrHostBits, "host bits set; did you mean 192.0.2.0/24", false},
		{"2001:db8::1/64", ErrHostBits, "host bits set; did you mean 2001:db8::/64", false},
		{"garbage", ErrSyntax, `"garbage" is not an IP address`, true},
		{"192.0.2.0/33", ErrSyntax, "not a CIDR prefix", true},
		{"192.0.2.0/", ErrSyntax, "not a CIDR prefix", true},
		{"/24", ErrSyntax, "not a CIDR prefix", true},
		{"192.0.2.1-", ErrSyntax, "missing address", false},
		{"-192.0.2.1", ErrSyntax, "missing address", false},
		{"-", ErrSyntax, "missing address", false},
		{"192.0.2.1-192.0.2.2-192.0.2.3", ErrSyntax, "not an IP address", true},
		{"192.0.2.0/24-192.0.3.0/24", ErrSyntax, "not a prefix", false},
		{"192.0.2.256", ErrSyntax, "not an IP address", true},
		{"192.0.2.1 192.0.2.2", ErrSyntax, "not an IP address", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := ParseRange(tt.in)
			if err == nil {
				t.Fatalf("ParseRange(%q) = %v, want error", tt.in, r)
			}
			if !errors.Is(err, tt.sentinel) {
				t.Errorf("error %v does not wrap %v", err, tt.sentinel)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *ParseError", err)
			}
			if pe.Input != tt.in {
				t.Errorf("Input = %q, want %q", pe.Input, tt.in)
			}
			if !strings.Contains(pe.Reason, tt.reasonHas) {
				t.Errorf("Reason = %q, want it to contain %q", pe.Reason, tt.reasonHas)
			}
			if (pe.Cause != nil) != tt.wantCauses {
				t.Errorf("Cause = %v, want cause: %v", pe.Cause, tt.wantCauses)
			}
			if !strings.Contains(err.Error(), pe.Reason) {
				t.Errorf("Error() = %q lacks the reason", err.Error())
			}
			if r != (Range{}) {
				t.Errorf("range on error = %v, want zero", r)
			}
		})
	}
}

func TestRangeInvalid(t *testing.T) {
	v4, v6 := mustAddr(t, "192.0.2.1"), mustAddr(t, "2001:db8::1")
	tests := []struct {
		name string
		r    Range
		want error
	}{
		{"zero", Range{}, ErrInvalidRange},
		{"half", Range{From: v4}, ErrInvalidRange},
		{"mixed", Range{From: v4, To: v6}, ErrMixedFamily},
		{"reversed", Range{From: v4.Next(), To: v4}, ErrReversed},
		{"zone", Range{From: v6.WithZone("eth0"), To: v6.WithZone("eth0")}, ErrZone},
		{"mapped", Range{From: netip.AddrFrom16(v4.As16()), To: netip.AddrFrom16(v4.As16())}, ErrMapped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.r.IsValid() {
				t.Fatalf("%#v is valid", tt.r)
			}
			if err := tt.r.validate(); !errors.Is(err, tt.want) || !errors.Is(err, ErrInvalidRange) {
				t.Errorf("validate() = %v, want %v and %v", err, tt.want, ErrInvalidRange)
			}
			if !strings.HasPrefix(tt.r.String(), "invalid Range(") {
				t.Errorf("String() = %q", tt.r.String())
			}
			if tt.r.Size().Sign() != 0 || tt.r.Contains(v4) || tt.r.Contains(v6) || tt.r.Overlaps(tt.r) {
				t.Errorf("invalid range %v has size, contains or overlaps", tt.r)
			}
			if _, err := NewSpace([]Range{tt.r}, nil, false); !errors.Is(err, ErrInvalidRange) {
				t.Errorf("NewSpace(range) error = %v", err)
			}
			if _, err := NewSpace(nil, []Range{tt.r}, false); !errors.Is(err, ErrInvalidRange) {
				t.Errorf("NewSpace(exclusion) error = %v", err)
			}
		})
	}
}

func TestRangeContains(t *testing.T) {
	tests := []struct {
		r, a string
		want bool
	}{
		{"192.0.2.0/24", "192.0.2.0", true},
		{"192.0.2.0/24", "192.0.2.255", true},
		{"192.0.2.0/24", "192.0.3.0", false},
		{"192.0.2.0/24", "192.0.1.255", false},
		{"192.0.2.0/24", "::ffff:192.0.2.1", false},
		{"::/0", "::ffff:192.0.2.1", true},
		{"::/0", "192.0.2.1", false},
		{"0.0.0.0/0", "2001:db8::", false},
		{"fe80::/64", "fe80::1%eth0", false},
		{"fe80::/64", "fe80::1", true},
		{"255.255.255.255", "255.255.255.255", true},
	}
	for _, tt := range tests {
		if got := mustRange(t, tt.r).Contains(mustAddr(t, tt.a)); got != tt.want {
			t.Errorf("%s.Contains(%s) = %v, want %v", tt.r, tt.a, got, tt.want)
		}
	}
	if mustRange(t, "::/0").Contains(netip.Addr{}) {
		t.Error("Contains(zero Addr) = true")
	}
}

func TestRangeOverlaps(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"192.0.2.0/24", "192.0.2.255-192.0.3.10", true},
		{"192.0.2.0/24", "192.0.3.0/24", false},
		{"192.0.2.0/24", "192.0.2.128/25", true},
		{"192.0.2.7", "192.0.2.7", true},
		{"0.0.0.0/0", "::/0", false},
		{"2001:db8::/64", "2001:db8::ffff:ffff:ffff:ffff-2001:db8:0:1::", true},
		{"2001:db8::/64", "2001:db8:0:1::/64", false},
	}
	for _, tt := range tests {
		a, b := mustRange(t, tt.a), mustRange(t, tt.b)
		if got := a.Overlaps(b); got != tt.want {
			t.Errorf("%s.Overlaps(%s) = %v, want %v", a, b, got, tt.want)
		}
		if got := b.Overlaps(a); got != tt.want {
			t.Errorf("%s.Overlaps(%s) = %v, want %v", b, a, got, tt.want)
		}
	}
}

func TestIsBuggy(t *testing.T) {
	tests := []struct {
		a    string
		want bool
	}{
		{"192.0.2.0", true},
		{"192.0.2.255", true},
		{"192.0.2.1", false},
		{"192.0.2.254", false},
		{"0.0.0.0", true},
		{"255.255.255.255", true},
		{"::ffff:192.0.2.0", false},
		{"2001:db8::", false},
		{"2001:db8::ff", false},
	}
	for _, tt := range tests {
		if got := IsBuggy(mustAddr(t, tt.a)); got != tt.want {
			t.Errorf("IsBuggy(%s) = %v, want %v", tt.a, got, tt.want)
		}
	}
	if IsBuggy(netip.Addr{}) {
		t.Error("IsBuggy(zero) = true")
	}
}
