package addrspace

import (
	"cmp"
	"fmt"
	"math/big"
	"net/netip"
	"slices"

	"go4.org/netipx"
)

// span is an inclusive run of free addresses as 128-bit integers.
type span struct{ from, to u128 }

// size returns to-from+1 modulo 2^128 (0 for the whole IPv6 space).
func (s span) size() u128 { return s.to.sub(s.from).add1() }

// FreeList is a mutable set of free addresses of one family, kept as sorted,
// disjoint, non-adjacent runs ("fragments"). Its cost depends on the number
// of fragments, never on the number of addresses. The zero value is an empty
// IPv6 free list; use NewFreeList or Space.FreeList. A FreeList is not safe
// for concurrent use.
type FreeList struct {
	is4   bool
	spans []span
	// count is the number of free addresses modulo 2^128: it is 0 both
	// when the list is empty and when it holds the whole IPv6 space.
	count u128
}

// NewFreeList returns a FreeList of the given family holding the addresses
// of ranges, which may be unsorted, overlapping or adjacent. It fails,
// wrapping ErrInvalidRange, for an invalid range (netipx.IPRangeFrom already
// drops zones), and wrapping
// ErrMixedFamily for a range of the other family. Cost: O(n log n).
func NewFreeList(is4 bool, ranges []netipx.IPRange) (*FreeList, error) {
	spans := make([]span, 0, len(ranges))
	for i, r := range ranges {
		switch {
		case !r.IsValid():
			return nil, fmt.Errorf("addrspace: free range %d (%s): %w", i, r, ErrInvalidRange)
		case r.From().Is4() != is4:
			return nil, fmt.Errorf("addrspace: free range %d (%s): %w", i, r, ErrMixedFamily)
		}
		spans = append(spans, span{u128Of(r.From()), u128Of(r.To())})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmpU128(a.from, b.from) })
	f := &FreeList{is4: is4, spans: spans[:0]}
	for _, s := range spans {
		if n := len(f.spans); n > 0 {
			last := &f.spans[n-1]
			// s.from >= last.from; merge when s starts inside last or right
			// after it (last.to+1 cannot wrap: s.from > last.to then).
			if !last.to.less(s.from) || last.to.add1() == s.from {
				if last.to.less(s.to) {
					last.to = s.to
				}
				continue
			}
		}
		f.spans = append(f.spans, s)
	}
	for _, s := range f.spans {
		f.count = f.count.add(s.size())
	}
	return f, nil
}

func cmpU128(a, b u128) int {
	return cmp.Or(cmp.Compare(a.hi, b.hi), cmp.Compare(a.lo, b.lo))
}

// key converts a to its integer form, reporting false for an address that
// cannot be in the list: invalid, zoned or of the other family.
func (f *FreeList) key(a netip.Addr) (u128, bool) {
	if !a.IsValid() || a.Zone() != "" || a.Is4() != f.is4 {
		return u128{}, false
	}
	return u128Of(a), true
}

// search returns the index of the first fragment whose end is >= k, or
// len(f.spans) if there is none. Cost: O(log n).
func (f *FreeList) search(k u128) int {
	lo, hi := 0, len(f.spans)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if f.spans[m].to.less(k) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Is4 reports whether the list holds IPv4 addresses.
func (f *FreeList) Is4() bool { return f.is4 }

// Lowest returns the lowest free address, or false if none is free.
// Cost: O(1).
func (f *FreeList) Lowest() (netip.Addr, bool) {
	if len(f.spans) == 0 {
		return netip.Addr{}, false
	}
	return f.spans[0].from.addr(f.is4), true
}

// Contains reports whether a is free. Cost: O(log n).
func (f *FreeList) Contains(a netip.Addr) bool {
	k, ok := f.key(a)
	if !ok {
		return false
	}
	i := f.search(k)
	return i < len(f.spans) && !k.less(f.spans[i].from)
}

// Take removes a from the free set, reporting false (and changing nothing)
// if a was not free. Cost: O(log n) search, plus a memmove of the later
// fragments when a is the only address of its fragment or splits it.
func (f *FreeList) Take(a netip.Addr) bool {
	k, ok := f.key(a)
	if !ok {
		return false
	}
	i := f.search(k)
	if i == len(f.spans) || k.less(f.spans[i].from) {
		return false
	}
	s := &f.spans[i]
	switch {
	case s.from == k && s.to == k:
		f.spans = slices.Delete(f.spans, i, i+1)
	case s.from == k:
		s.from = k.add1() // k < s.to, so no overflow
	case s.to == k:
		s.to = k.sub1() // k > s.from, so no underflow
	default:
		upper := span{k.add1(), s.to}
		s.to = k.sub1()
		f.spans = slices.Insert(f.spans, i+1, upper)
	}
	f.count = f.count.sub1()
	return true
}

// Put returns a to the free set, merging it with free neighbours, and
// reports false (changing nothing) if a was already free. Put does not know
// the pool's bounds: callers must only return addresses of their Space.
// Cost: O(log n) search, plus a memmove of the later fragments when a joins
// two fragments or starts a new one.
func (f *FreeList) Put(a netip.Addr) bool {
	k, ok := f.key(a)
	if !ok {
		return false
	}
	i := f.search(k)
	if i < len(f.spans) && !k.less(f.spans[i].from) {
		return false
	}
	// Now spans[i-1].to < k < spans[i].from, so neither k-1 nor k+1 below
	// can wrap around when those fragments exist.
	joinsLeft := i > 0 && f.spans[i-1].to.add1() == k
	joinsRight := i < len(f.spans) && k.add1() == f.spans[i].from
	switch {
	case joinsLeft && joinsRight:
		f.spans[i-1].to = f.spans[i].to
		f.spans = slices.Delete(f.spans, i, i+1)
	case joinsLeft:
		f.spans[i-1].to = k
	case joinsRight:
		f.spans[i].from = k
	default:
		f.spans = slices.Insert(f.spans, i, span{k, k})
	}
	f.count = f.count.add1()
	return true
}

// Count returns the number of free addresses. It is exact, including 2^128
// for the whole IPv6 space. Cost: O(1) plus a big.Int allocation.
func (f *FreeList) Count() *big.Int {
	return count(f.count, len(f.spans) > 0)
}

// Fragments returns the number of disjoint runs of free addresses.
// Cost: O(1).
func (f *FreeList) Fragments() int { return len(f.spans) }

// Ranges returns a copy of the free runs, sorted, disjoint and
// non-adjacent. Cost: O(n).
func (f *FreeList) Ranges() []netipx.IPRange {
	out := make([]netipx.IPRange, len(f.spans))
	for i, s := range f.spans {
		out[i] = netipx.IPRangeFrom(s.from.addr(f.is4), s.to.addr(f.is4))
	}
	return out
}

// Clone returns an independent copy of f. Cost: O(n).
func (f *FreeList) Clone() *FreeList {
	return &FreeList{is4: f.is4, spans: slices.Clone(f.spans), count: f.count}
}
