package addrspace

import (
	"encoding/binary"
	"math/big"
	"math/bits"
	"net/netip"
)

// u128 is an address (or a count of addresses) as an unsigned 128-bit
// integer. IPv4 addresses occupy the low 32 bits.
type u128 struct{ hi, lo uint64 }

// u128Of returns a as an integer. Any zone is ignored; callers reject zones.
func u128Of(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{lo: uint64(binary.BigEndian.Uint32(b[:]))}
	}
	b := a.As16()
	return u128{hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:])}
}

// addr converts u back to an address of the given family. For IPv4 only the
// low 32 bits are used.
func (u u128) addr(is4 bool) netip.Addr {
	if is4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(u.lo))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], u.hi)
	binary.BigEndian.PutUint64(b[8:], u.lo)
	return netip.AddrFrom16(b)
}

func (u u128) less(v u128) bool {
	return u.hi < v.hi || (u.hi == v.hi && u.lo < v.lo)
}

func (u u128) isZero() bool { return u.hi|u.lo == 0 }

// add returns u+v modulo 2^128.
func (u u128) add(v u128) u128 {
	lo, c := bits.Add64(u.lo, v.lo, 0)
	hi, _ := bits.Add64(u.hi, v.hi, c)
	return u128{hi, lo}
}

// sub returns u-v modulo 2^128.
func (u u128) sub(v u128) u128 {
	lo, b := bits.Sub64(u.lo, v.lo, 0)
	hi, _ := bits.Sub64(u.hi, v.hi, b)
	return u128{hi, lo}
}

func (u u128) add1() u128 { return u.add(u128{lo: 1}) }
func (u u128) sub1() u128 { return u.sub(u128{lo: 1}) }

// big returns u as a new big.Int.
func (u u128) big() *big.Int {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], u.hi)
	binary.BigEndian.PutUint64(b[8:], u.lo)
	return new(big.Int).SetBytes(b[:])
}

// spanSize returns to-from+1 as a big.Int; it is exact even for the whole
// IPv6 space (2^128).
func spanSize(from, to u128) *big.Int {
	n := to.sub(from).big()
	return n.Add(n, big.NewInt(1))
}

// count converts a number of addresses kept modulo 2^128 to a big.Int. The
// only set of addresses whose size is 0 modulo 2^128 but that is not empty
// is the whole IPv6 space, so a zero c of a non-empty set is 2^128.
func count(c u128, nonEmpty bool) *big.Int {
	if c.isZero() && nonEmpty {
		return new(big.Int).Lsh(big.NewInt(1), 128)
	}
	return c.big()
}
