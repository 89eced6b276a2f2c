package planner

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// The rendezvous hash is part of the protocol between IPAM replicas: every
// replica, of every version running at once during a rolling upgrade, must
// pick the same L2 owner. Changing anything here moves addresses; the golden
// test in hash_test.go pins it.

// FNV-1a, 64 bits.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// nodeKey hashes a node name: FNV-1a, then mixed, so that weight needs a
// single mix per (address, node) pair.
func nodeKey(name string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= fnvPrime
	}
	return mix64(h)
}

// addrKey hashes an address: FNV-1a over its family (4 or 6) and its 16-byte
// form.
func addrKey(a netip.Addr) uint64 {
	h := uint64(fnvOffset)
	fam := byte(6)
	if a.Is4() {
		fam = 4
	}
	h ^= uint64(fam)
	h *= fnvPrime
	b := a.As16()
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

// weight is the rendezvous weight of a node for an address: the node with
// the highest weight among the candidates owns the address.
func weight(addr, node uint64) uint64 { return mix64(addr ^ node) }

// mix64 is the 64-bit finalizer of MurmurHash3: a bijection in which every
// input bit affects every output bit.
func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// bitset is a set of small non-negative integers (indexes of advertisements,
// peers or nodes).
type bitset []uint64

// newBitset returns an empty set able to hold 0..n-1.
func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

// set adds i to b.
func (b bitset) set(i int) { b[i/64] |= 1 << (i % 64) }

// empty reports whether b holds nothing.
func (b bitset) empty() bool {
	for _, w := range b {
		if w != 0 {
			return false
		}
	}
	return true
}

// or adds every member of o to b; both have the same size.
func (b bitset) or(o bitset) {
	for i := range b {
		b[i] |= o[i]
	}
}

// and returns the intersection of b and o, of the same size, in a new set.
func (b bitset) and(o bitset) bitset {
	r := make(bitset, len(b))
	for i := range b {
		r[i] = b[i] & o[i]
	}
	return r
}

// clone returns a copy of b.
func (b bitset) clone() bitset { return append(bitset(nil), b...) }

// each calls f with every member of b in increasing order.
func (b bitset) each(f func(int)) {
	for wi, w := range b {
		for w != 0 {
			j := bits.TrailingZeros64(w)
			f(wi*64 + j)
			w &= w - 1
		}
	}
}

// key returns b as a string, for map keys.
func (b bitset) key() string {
	buf := make([]byte, 0, 8*len(b))
	for _, w := range b {
		buf = binary.LittleEndian.AppendUint64(buf, w)
	}
	return string(buf)
}
