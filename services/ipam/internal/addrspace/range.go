package addrspace

import (
	"cmp"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"

	"go4.org/netipx"
)

// Range is an inclusive range of addresses of one family. A valid Range (see
// IsValid) has From <= To, both of the same family, without zones, and
// without IPv4-mapped IPv6 addresses. ParseRange only returns valid Ranges.
type Range struct{ From, To netip.Addr }

// ParseRange parses a CIDR prefix ("192.0.2.0/24", "2001:db8::/64"), an
// inclusive a-b range ("198.51.100.10-198.51.100.20", spaces around '-'
// allowed) or a single address ("192.0.2.7"). Surrounding white space is
// ignored. It rejects empty input, mixed families, reversed ranges, zones,
// IPv4-mapped IPv6 addresses and prefixes with host bits set; the error is a
// *ParseError wrapping one of the package's sentinel errors.
func ParseRange(s string) (Range, error) {
	in := strings.TrimSpace(s)
	fail := func(sentinel error, cause error, format string, args ...any) (Range, error) {
		return Range{}, &ParseError{Input: s, Reason: fmt.Sprintf(format, args...), Err: sentinel, Cause: cause}
	}
	switch {
	case in == "":
		return fail(ErrEmpty, nil, "empty range")
	case strings.ContainsRune(in, '%'):
		// Zones may contain '-' and '/', so look for them before splitting.
		return fail(ErrZone, nil, "zoned addresses are not allowed")
	}

	if lo, hi, ok := strings.Cut(in, "-"); ok {
		lo, hi = strings.TrimSpace(lo), strings.TrimSpace(hi)
		from, err := parseBound(s, lo)
		if err != nil {
			return Range{}, err
		}
		to, err := parseBound(s, hi)
		if err != nil {
			return Range{}, err
		}
		if from.Is4() != to.Is4() {
			return fail(ErrMixedFamily, nil, "%s and %s are of different address families", from, to)
		}
		if to.Less(from) {
			return fail(ErrReversed, nil, "start %s is after end %s", from, to)
		}
		return Range{From: from, To: to}, nil
	}

	if strings.Contains(in, "/") {
		p, err := netip.ParsePrefix(in)
		if err != nil {
			return fail(ErrSyntax, err, "not a CIDR prefix")
		}
		if p.Addr().Is4In6() {
			return fail(ErrMapped, nil, "IPv4-mapped IPv6 prefixes are not allowed; write the IPv4 prefix instead")
		}
		if m := p.Masked(); m != p {
			return fail(ErrHostBits, nil, "host bits set; did you mean %s", m)
		}
		r := netipx.RangeOfPrefix(p)
		return Range{From: r.From(), To: r.To()}, nil
	}

	a, err := parseBound(s, in)
	if err != nil {
		return Range{}, err
	}
	return Range{From: a, To: a}, nil
}

// parseBound parses one address of an a-b range or a single address; input is
// the whole ParseRange argument, for the error.
func parseBound(input, s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, &ParseError{Input: input, Reason: "missing address", Err: ErrSyntax}
	}
	if strings.Contains(s, "/") {
		return netip.Addr{}, &ParseError{Input: input,
			Reason: fmt.Sprintf("%q: a range bound must be an address, not a prefix", s), Err: ErrSyntax}
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, &ParseError{Input: input,
			Reason: fmt.Sprintf("%q is not an IP address", s), Err: ErrSyntax, Cause: err}
	}
	if a.Is4In6() {
		return netip.Addr{}, &ParseError{Input: input,
			Reason: fmt.Sprintf("IPv4-mapped IPv6 address %s is not allowed; write %s", a, a.Unmap()), Err: ErrMapped}
	}
	return a, nil
}

// IsValid reports whether r is a valid range: From and To are valid
// addresses of the same family, neither has a zone or is an IPv4-mapped IPv6
// address, and From <= To.
func (r Range) IsValid() bool { return r.validate() == nil }

// validate explains why r is not valid; the error wraps ErrInvalidRange and,
// where one applies, the more specific sentinel.
func (r Range) validate() error {
	switch {
	case !r.From.IsValid() || !r.To.IsValid():
		return fmt.Errorf("%w: zero address", ErrInvalidRange)
	case r.From.Zone() != "" || r.To.Zone() != "":
		return fmt.Errorf("%w: %w", ErrInvalidRange, ErrZone)
	case r.From.Is4In6() || r.To.Is4In6():
		return fmt.Errorf("%w: %w", ErrInvalidRange, ErrMapped)
	case r.From.Is4() != r.To.Is4():
		return fmt.Errorf("%w: %w", ErrInvalidRange, ErrMixedFamily)
	case r.To.Less(r.From):
		return fmt.Errorf("%w: %w", ErrInvalidRange, ErrReversed)
	}
	return nil
}

// String returns the canonical form of r: a plain address when r holds one
// address, a CIDR prefix when r is exactly one prefix, "From-To" otherwise.
// ParseRange(r.String()) returns r for every valid r. An invalid Range
// formats as "invalid Range(From-To)".
func (r Range) String() string {
	if !r.IsValid() {
		return fmt.Sprintf("invalid Range(%s-%s)", r.From, r.To)
	}
	if r.From == r.To {
		return r.From.String()
	}
	if p, ok := netipx.IPRangeFrom(r.From, r.To).Prefix(); ok {
		return p.String()
	}
	return r.From.String() + "-" + r.To.String()
}

// IPRange returns r as a netipx.IPRange.
func (r Range) IPRange() netipx.IPRange { return netipx.IPRangeFrom(r.From, r.To) }

// Contains reports whether a lies within r. Zoned addresses are never
// contained, and an IPv4-mapped IPv6 address is not an IPv4 address.
func (r Range) Contains(a netip.Addr) bool {
	return r.IsValid() && a.IsValid() && a.Zone() == "" && a.Is4() == r.From.Is4() &&
		r.From.Compare(a) <= 0 && a.Compare(r.To) <= 0
}

// Is4 reports whether r is an IPv4 range.
func (r Range) Is4() bool { return r.From.Is4() }

// Size returns the number of addresses in r (0 for an invalid Range). It is
// exact for any range, up to 2^128 for ::/0.
func (r Range) Size() *big.Int {
	if !r.IsValid() {
		return new(big.Int)
	}
	return spanSize(u128Of(r.From), u128Of(r.To))
}

// Overlaps reports whether r and o share at least one address. Invalid
// ranges and ranges of different families never overlap.
func (r Range) Overlaps(o Range) bool {
	return r.IsValid() && o.IsValid() && r.Is4() == o.Is4() &&
		r.From.Compare(o.To) <= 0 && o.From.Compare(r.To) <= 0
}

// Overlap reports the first overlapping part of two lists of ranges, as used
// to enforce "pools must not overlap". The result is the lowest maximal run
// of addresses that both lists cover (IPv4 before IPv6), so it does not
// depend on the order of either list, and ranges within a list may overlap or
// touch. Invalid ranges are ignored. Cost: O(n log n) in the total number of
// ranges.
func Overlap(a, b []Range) (Range, bool) {
	as, bs := mergeRanges(a), mergeRanges(b)
	for i, j := 0, 0; i < len(as) && j < len(bs); {
		x, y := as[i], bs[j]
		switch {
		case x.To.Less(y.From): // also true for IPv4 x before IPv6 y
			i++
		case y.To.Less(x.From):
			j++
		default:
			return Range{From: maxAddr(x.From, y.From), To: minAddr(x.To, y.To)}, true
		}
	}
	return Range{}, false
}

// mergeRanges returns the valid ranges of rs sorted (IPv4 first), with
// overlapping and adjacent ranges merged. rs is not modified.
func mergeRanges(rs []Range) []Range {
	out := make([]Range, 0, len(rs))
	for _, r := range rs {
		if r.IsValid() {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(x, y Range) int {
		return cmp.Or(x.From.Compare(y.From), x.To.Compare(y.To))
	})
	merged := out[:0]
	for _, r := range out {
		if n := len(merged); n > 0 {
			last := &merged[n-1]
			// Next is invalid after the last address of a family, so it
			// never equals the start of a range of the other family.
			if !last.To.Less(r.From) || last.To.Next() == r.From {
				if last.To.Less(r.To) {
					last.To = r.To
				}
				continue
			}
		}
		merged = append(merged, r)
	}
	return merged
}

func maxAddr(a, b netip.Addr) netip.Addr {
	if a.Less(b) {
		return b
	}
	return a
}

func minAddr(a, b netip.Addr) netip.Addr {
	if b.Less(a) {
		return b
	}
	return a
}
