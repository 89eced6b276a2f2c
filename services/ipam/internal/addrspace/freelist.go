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
	is4 bool
	// buf[head:] are the fragments, in ascending order. The unused slots
	// buf[:head] let a fragment be inserted or removed near the low end by
	// moving the fragments before it rather than those after it.
	buf  []span
	head int
	// count is the number of free addresses modulo 2^128: it is 0 both
	// when the list is empty and when it holds the whole IPv6 space.
	count u128
}

// NewFreeList returns a FreeList of the given family holding the addresses
// of ranges, which may be unsorted, overlapping or adjacent. It fails,
// wrapping ErrInvalidRange, for an invalid range (netipx.IPRangeFrom already
// drops zones), and also wrapping ErrMixedFamily for a range of the other
// family.
// Cost: O(n log n).
func NewFreeList(is4 bool, ranges []netipx.IPRange) (*FreeList, error) {
	spans := make([]span, 0, len(ranges))
	for i, r := range ranges {
		switch {
		case !r.IsValid():
			return nil, fmt.Errorf("addrspace: free range %d (%s): %w", i, r, ErrInvalidRange)
		case r.From().Is4() != is4:
			return nil, fmt.Errorf("addrspace: free range %d (%s): %w: %w", i, r, ErrInvalidRange, ErrMixedFamily)
		}
		spans = append(spans, span{u128Of(r.From()), u128Of(r.To())})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmpU128(a.from, b.from) })
	f := &FreeList{is4: is4, buf: spans[:0]}
	for _, s := range spans {
		if n := len(f.buf); n > 0 {
			last := &f.buf[n-1]
			// s.from >= last.from; merge when s starts inside last or right
			// after it (last.to+1 cannot wrap: s.from > last.to then).
			if !last.to.less(s.from) || last.to.add1() == s.from {
				if last.to.less(s.to) {
					last.to = s.to
				}
				continue
			}
		}
		f.buf = append(f.buf, s)
	}
	for _, s := range f.buf {
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

// spans returns the fragments, in ascending order.
func (f *FreeList) spans() []span { return f.buf[f.head:] }

// search returns the index in f.spans() of the first fragment whose end is
// >= k, or the number of fragments if there is none. Cost: O(log n).
func (f *FreeList) search(k u128) int {
	spans := f.spans()
	lo, hi := 0, len(spans)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if spans[m].to.less(k) {
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
	if f.head == len(f.buf) {
		return netip.Addr{}, false
	}
	return f.buf[f.head].from.addr(f.is4), true
}

// LowestN returns the n lowest free addresses in ascending order, or false
// if fewer than n are free. Cost: O(n).
func (f *FreeList) LowestN(n int) ([]netip.Addr, bool) {
	out := make([]netip.Addr, 0, n)
	for _, s := range f.spans() {
		for k := s.from; len(out) < n; k = k.add1() {
			out = append(out, k.addr(f.is4))
			if k == s.to {
				break
			}
		}
		if len(out) == n {
			return out, true
		}
	}
	return nil, false
}

// Contains reports whether a is free. Cost: O(log n).
func (f *FreeList) Contains(a netip.Addr) bool {
	k, ok := f.key(a)
	if !ok {
		return false
	}
	i, spans := f.search(k), f.spans()
	return i < len(spans) && !k.less(spans[i].from)
}

// Take removes a from the free set, reporting false (and changing nothing)
// if a was not free. Cost: O(log n) search, plus, when a is the only
// address of its fragment or splits it, a memmove of the fragments on the
// shorter side (O(1) amortized near either end of the list).
func (f *FreeList) Take(a netip.Addr) bool {
	k, ok := f.key(a)
	if !ok {
		return false
	}
	i, spans := f.search(k), f.spans()
	if i == len(spans) || k.less(spans[i].from) {
		return false
	}
	s := &spans[i]
	switch {
	case s.from == k && s.to == k:
		f.remove(i)
	case s.from == k:
		s.from = k.add1() // k < s.to, so no overflow
	case s.to == k:
		s.to = k.sub1() // k > s.from, so no underflow
	default:
		lower := span{s.from, k.sub1()}
		s.from = k.add1()
		f.insert(i, lower)
	}
	f.count = f.count.sub1()
	return true
}

// Put returns a to the free set, merging it with free neighbours, and
// reports false (changing nothing) if a was already free. Put does not know
// the pool's bounds: callers must only return addresses of their Space.
// Cost: O(log n) search, plus, when a joins two fragments or starts a new
// one, a memmove of the fragments on the shorter side (O(1) amortized near
// either end of the list).
func (f *FreeList) Put(a netip.Addr) bool {
	k, ok := f.key(a)
	if !ok {
		return false
	}
	i, spans := f.search(k), f.spans()
	if i < len(spans) && !k.less(spans[i].from) {
		return false
	}
	// Now spans[i-1].to < k < spans[i].from, so neither k-1 nor k+1 below
	// can wrap around when those fragments exist.
	joinsLeft := i > 0 && spans[i-1].to.add1() == k
	joinsRight := i < len(spans) && k.add1() == spans[i].from
	switch {
	case joinsLeft && joinsRight:
		spans[i].from = spans[i-1].from
		f.remove(i - 1)
	case joinsLeft:
		spans[i-1].to = k
	case joinsRight:
		spans[i].from = k
	default:
		f.insert(i, span{k, k})
	}
	f.count = f.count.add1()
	return true
}

// Count returns the number of free addresses. It is exact, including 2^128
// for the whole IPv6 space. Cost: O(1) plus a big.Int allocation.
func (f *FreeList) Count() *big.Int {
	return count(f.count, f.Fragments() > 0)
}

// Fragments returns the number of disjoint runs of free addresses.
// Cost: O(1).
func (f *FreeList) Fragments() int { return len(f.buf) - f.head }

// Ranges returns a copy of the free runs, sorted, disjoint and
// non-adjacent. Cost: O(n).
func (f *FreeList) Ranges() []netipx.IPRange {
	out := make([]netipx.IPRange, f.Fragments())
	for i, s := range f.spans() {
		out[i] = netipx.IPRangeFrom(s.from.addr(f.is4), s.to.addr(f.is4))
	}
	return out
}

// Clone returns an independent copy of f. Cost: O(n).
func (f *FreeList) Clone() *FreeList {
	return &FreeList{is4: f.is4, buf: slices.Clone(f.spans()), count: f.count}
}

// insert makes s the i-th fragment. It moves whichever side of position i
// is shorter: the fragments before it, into the spare slot below head, or
// those after it. When that side has no spare slot, the buffer is first
// regrown with spare slots at both ends, so inserting near either end is
// O(1) amortized.
func (f *FreeList) insert(i int, s span) {
	n := f.Fragments()
	front := i < n-i
	if (front && f.head == 0) || (!front && len(f.buf) == cap(f.buf)) {
		f.grow()
	}
	if front {
		copy(f.buf[f.head-1:], f.buf[f.head:f.head+i])
		f.head--
	} else {
		f.buf = f.buf[:len(f.buf)+1]
		copy(f.buf[f.head+i+1:], f.buf[f.head+i:])
	}
	f.buf[f.head+i] = s
}

// remove deletes the i-th fragment, moving the shorter side of it.
func (f *FreeList) remove(i int) {
	n := f.Fragments()
	if i < n-1-i {
		copy(f.buf[f.head+1:], f.buf[f.head:f.head+i])
		f.head++
	} else {
		copy(f.buf[f.head+i:], f.buf[f.head+i+1:])
		f.buf = f.buf[:len(f.buf)-1]
	}
	if f.head == len(f.buf) {
		f.buf, f.head = f.buf[:0], 0
	}
}

// grow moves the n fragments to a new buffer of 2n+8 slots, centred so that
// at least n/2+4 can be inserted at either end before it is needed again.
func (f *FreeList) grow() {
	n := f.Fragments()
	c := 2*n + 8
	head := (c - n) / 2
	buf := make([]span, head+n, c)
	copy(buf[head:], f.spans())
	f.buf, f.head = buf, head
}
