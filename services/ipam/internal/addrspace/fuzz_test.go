package addrspace

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go4.org/netipx"
)

// FuzzParseRange checks that ParseRange never panics, that its errors are
// classified *ParseErrors, and that what it accepts formats canonically:
// String re-parses to the same Range and is a fixed point.
func FuzzParseRange(f *testing.F) {
	sentinels := []error{ErrEmpty, ErrSyntax, ErrMixedFamily, ErrReversed, ErrZone, ErrMapped, ErrHostBits}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRange(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Input != s || pe.Reason == "" {
				t.Fatalf("ParseRange(%q): error %#v is not a complete *ParseError", s, err)
			}
			n := 0
			for _, e := range sentinels {
				if errors.Is(err, e) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("ParseRange(%q): error %v wraps %d sentinels, want 1", s, err, n)
			}
			return
		}
		if !r.IsValid() {
			t.Fatalf("ParseRange(%q) = invalid %#v", s, r)
		}
		canon := r.String()
		again, err := ParseRange(canon)
		if err != nil {
			t.Fatalf("ParseRange(%q) = %v, but its String %q does not parse: %v", s, r, canon, err)
		}
		if again != r {
			t.Fatalf("ParseRange(%q) = %v, ParseRange(%q) = %v", s, r, canon, again)
		}
		if again.String() != canon {
			t.Fatalf("String not canonical: %q then %q", canon, again.String())
		}
		if !r.Contains(r.From) || !r.Contains(r.To) || r.Size().Sign() <= 0 || !r.Overlaps(r) {
			t.Fatalf("%v does not contain its bounds or has no size", r)
		}
	})
}

func offset(base netip.Addr, n byte) netip.Addr {
	u := u128Of(base).add(u128{lo: uint64(n)})
	return u.addr(base.Is4())
}

// FuzzFreeList runs an arbitrary sequence of operations on a FreeList over a
// 64-address universe and checks every result against the map model.
// Layout: data[0] picks the universe, data[1] and data[2] bound the initial
// free run, then (op, address offset) byte pairs follow.
func FuzzFreeList(f *testing.F) {
	// 64-address universes at the bottom, middle and top of each family.
	bases := []string{
		"192.0.2.0", "0.0.0.0", "255.255.255.192",
		"2001:db8::", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffc0",
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		base := netip.MustParseAddr(bases[int(data[0])%len(bases)])
		lo, hi := data[1]%64, data[2]%64
		if hi < lo {
			lo, hi = hi, lo
		}
		m := model{}
		for i := lo; i <= hi; i++ {
			m[offset(base, i)] = true
		}
		fl, err := NewFreeList(base.Is4(), []netipx.IPRange{netipx.IPRangeFrom(offset(base, lo), offset(base, hi))})
		if err != nil {
			t.Fatal(err)
		}
		for ops := data[3:]; len(ops) >= 2; ops = ops[2:] {
			a := offset(base, ops[1]%64)
			switch ops[0] % 4 {
			case 0:
				if got, want := fl.Take(a), m[a]; got != want {
					t.Fatalf("Take(%s) = %v, want %v", a, got, want)
				}
				delete(m, a)
			case 1:
				if got, want := fl.Put(a), !m[a]; got != want {
					t.Fatalf("Put(%s) = %v, want %v", a, got, want)
				}
				m[a] = true
			case 2:
				if got, want := fl.Contains(a), m[a]; got != want {
					t.Fatalf("Contains(%s) = %v, want %v", a, got, want)
				}
			case 3:
				low, ok := fl.Lowest()
				if ok != (len(m) > 0) || (ok && low != m.sorted()[0]) {
					t.Fatalf("Lowest() = %v, %v; model %v", low, ok, m.sorted())
				}
				if ok {
					fl.Take(low)
					delete(m, low)
				}
			}
			checkInvariants(t, fl)
		}
		compare(t, fl, m)
	})
}

// FuzzOverlap compares Overlap with a brute-force search over small ranges.
// Each range is three bytes: flags (bit 0: which list, bits 1-2: universe,
// bit 3: keep the bounds reversed, making an invalid range that must be
// ignored) and two offsets below 32.
func FuzzOverlap(f *testing.F) {
	// Universes: two IPv4 (one at the top of the space), two IPv6.
	bases := []string{"10.0.0.0", "255.255.255.224", "2001:db8::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffe0"}
	f.Fuzz(func(t *testing.T, data []byte) {
		var lists [2][]Range
		sets := [2]map[netip.Addr]bool{{}, {}}
		for ; len(data) >= 3; data = data[3:] {
			flags := data[0]
			base := netip.MustParseAddr(bases[(flags>>1)%4])
			lo, hi := data[1]%32, data[2]%32
			list := flags & 1
			if hi < lo && flags&8 != 0 {
				lists[list] = append(lists[list], Range{From: offset(base, lo), To: offset(base, hi)})
				continue
			}
			lo, hi = min(lo, hi), max(lo, hi)
			lists[list] = append(lists[list], Range{From: offset(base, lo), To: offset(base, hi)})
			for i := lo; i <= hi; i++ {
				sets[list][offset(base, i)] = true
			}
		}
		both := model{}
		for a := range sets[0] {
			if sets[1][a] {
				both[a] = true
			}
		}
		got, ok := Overlap(lists[0], lists[1])
		if len(both) == 0 {
			if ok {
				t.Fatalf("Overlap(%v, %v) = %v, want none", lists[0], lists[1], got)
			}
			return
		}
		first := both.sorted()[0]
		want := Range{From: first, To: first}
		for next := first.Next(); both[next]; next = next.Next() {
			want.To = next
		}
		if !ok {
			t.Fatalf("Overlap(%v, %v): none, want %v", lists[0], lists[1], want)
		}
		if diff := cmp.Diff(want, got, addrCmp()); diff != "" {
			t.Fatalf("Overlap(%v, %v) (-want +got):\n%s", lists[0], lists[1], diff)
		}
	})
}
