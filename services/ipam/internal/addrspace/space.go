package addrspace

import (
	"fmt"
	"math/big"
	"net/netip"
	"sort"

	"go4.org/netipx"
)

// IsBuggy reports whether a is an IPv4 address ending in .0 or .255. Some
// clients mishandle such addresses even when they are perfectly valid hosts
// of a larger prefix (MetalLB's avoid-buggy-ips).
func IsBuggy(a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	last := a.As4()[3]
	return last == 0 || last == 255
}

// Space is the immutable set of addresses a pool can hand out: its ranges
// minus its exclusions, minus buggy IPv4 addresses when asked. A Space is
// safe for concurrent use.
//
// The zero Space is empty.
type Space struct {
	v4, v6 []netipx.IPRange
	// size4 and size6 count the addresses modulo 2^128 (see count).
	size4, size6 u128
}

// NewSpace builds the Space of ranges minus exclusions, and minus every
// IPv4 address ending in .0 or .255 when avoidBuggy is set. Ranges may
// overlap or touch each other and may be of both families; exclusions may
// lie partly or wholly outside the ranges (the outside part is ignored). It
// fails, wrapping ErrInvalidRange, only when a range or exclusion is not
// valid (see Range.IsValid).
//
// Cost: O(n log n) in the number of ranges and exclusions. avoidBuggy is
// range arithmetic, not an address walk: each /24 block touched by an IPv4
// range loses its two edge addresses and leaves one fragment (.1–.254), so
// it costs O(k) in the number k of /24 blocks and yields k fragments (256 for
// a /16, 65,536 for a /8, 2^24 for 0.0.0.0/0): callers bound k (see
// MaxBuggyBlocks).
func NewSpace(ranges, exclusions []Range, avoidBuggy bool) (*Space, error) {
	var b netipx.IPSetBuilder
	for i, r := range ranges {
		if err := r.validate(); err != nil {
			return nil, fmt.Errorf("addrspace: range %d (%s): %w", i, r, err)
		}
		b.AddRange(r.IPRange())
	}
	for i, r := range exclusions {
		if err := r.validate(); err != nil {
			return nil, fmt.Errorf("addrspace: exclusion %d (%s): %w", i, r, err)
		}
		b.RemoveRange(r.IPRange())
	}
	set, err := b.IPSet()
	if err != nil {
		// Unreachable: every range was validated above.
		return nil, fmt.Errorf("addrspace: building address set: %w: %w", ErrInvalidRange, err)
	}
	s := &Space{}
	for _, r := range set.Ranges() {
		if !r.From().Is4() {
			s.v6 = append(s.v6, r)
			continue
		}
		if avoidBuggy {
			s.v4 = appendWithoutBuggy(s.v4, r)
		} else {
			s.v4 = append(s.v4, r)
		}
	}
	for _, r := range s.v4 {
		s.size4 = s.size4.add(span{u128Of(r.From()), u128Of(r.To())}.size())
	}
	for _, r := range s.v6 {
		s.size6 = s.size6.add(span{u128Of(r.From()), u128Of(r.To())}.size())
	}
	return s, nil
}

// appendWithoutBuggy appends to dst the parts of the IPv4 range r that are
// not .0 or .255, one fragment per /24 block touched by r, in order.
func appendWithoutBuggy(dst []netipx.IPRange, r netipx.IPRange) []netipx.IPRange {
	from, to := uint32(u128Of(r.From()).lo), uint32(u128Of(r.To()).lo)
	// Iterate over /24 block numbers (at most 2^24), so the loop cannot
	// overflow at 255.255.255.0.
	for blk := from >> 8; blk <= to>>8; blk++ {
		base := blk << 8
		lo, hi := max(from, base+1), min(to, base+254)
		if lo <= hi {
			dst = append(dst, netipx.IPRangeFrom(v4(lo), v4(hi)))
		}
	}
	return dst
}

func v4(x uint32) netip.Addr { return u128{lo: uint64(x)}.addr(true) }

func (s *Space) ranges(is4 bool) []netipx.IPRange {
	if is4 {
		return s.v4
	}
	return s.v6
}

// Contains reports whether a is in the space. Cost: O(log n).
func (s *Space) Contains(a netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" {
		return false
	}
	rs := s.ranges(a.Is4())
	i := sort.Search(len(rs), func(i int) bool { return a.Compare(rs[i].To()) <= 0 })
	return i < len(rs) && rs[i].From().Compare(a) <= 0
}

// Ranges returns a copy of the available ranges of one family, sorted,
// disjoint and non-adjacent.
func (s *Space) Ranges(is4 bool) []netipx.IPRange {
	return append([]netipx.IPRange(nil), s.ranges(is4)...)
}

// Size returns the number of available addresses of one family.
func (s *Space) Size(is4 bool) *big.Int {
	if is4 {
		return count(s.size4, len(s.v4) > 0)
	}
	return count(s.size6, len(s.v6) > 0)
}

// HasFamily reports whether the space has any address of the family.
func (s *Space) HasFamily(is4 bool) bool { return len(s.ranges(is4)) > 0 }

// FreeList returns a new FreeList holding every address of one family of the
// space, for a pool with nothing allocated yet. Cost: O(n).
func (s *Space) FreeList(is4 bool) *FreeList {
	rs := s.ranges(is4)
	f := &FreeList{is4: is4, buf: make([]span, len(rs)), count: s.size6}
	if is4 {
		f.count = s.size4
	}
	for i, r := range rs {
		f.buf[i] = span{u128Of(r.From()), u128Of(r.To())}
	}
	return f
}
