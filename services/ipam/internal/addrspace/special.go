package addrspace

import (
	"net/netip"

	"go4.org/netipx"
)

// Reserved is a block of addresses no pool may hand out: a host or a
// router would never answer for them as a service address (loopback,
// link-local, multicast), or they name no single host (this network,
// broadcast), or they are IPv4 addresses in IPv6 form, which would be a
// second name, and a second claim, for an IPv4 address.
type Reserved struct {
	Prefix netip.Prefix
	Name   string
}

// reservedBlocks returns the reserved blocks, in address order per family.
func reservedBlocks() []Reserved {
	return []Reserved{
		{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\""},
		{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
		{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
		{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
		{netip.MustParsePrefix("255.255.255.255/32"), "limited broadcast"},
		{netip.MustParsePrefix("::/128"), "unspecified"},
		{netip.MustParsePrefix("::1/128"), "loopback"},
		{netip.MustParsePrefix("::ffff:0:0/96"), "IPv4-mapped"},
		{netip.MustParsePrefix("fe80::/10"), "link-local"},
		{netip.MustParsePrefix("ff00::/8"), "multicast"},
	}
}

// ReservedIn returns the first reserved block that r overlaps.
func ReservedIn(r Range) (Reserved, bool) {
	if !r.IsValid() {
		return Reserved{}, false
	}
	for _, b := range reservedBlocks() {
		// Compared directly: a Range of the IPv4-mapped block is not a
		// valid one (see Range.IsValid).
		from, to := b.Prefix.Addr(), netipx.PrefixLastIP(b.Prefix)
		if r.Is4() == from.Is4() && r.From.Compare(to) <= 0 && from.Compare(r.To) <= 0 {
			return b, true
		}
	}
	return Reserved{}, false
}

// MaxBuggyBlocks is the most /24 blocks (those of a /8) a space may span
// when it avoids buggy addresses: each is a fragment of its own (see
// NewSpace), and a replica holds every pool's fragments in memory.
const MaxBuggyBlocks = 1 << 16

// Blocks24 returns how many /24 blocks the IPv4 ranges of rs touch
// (counting a block touched by two ranges twice).
func Blocks24(rs []Range) uint64 {
	var n uint64
	for _, r := range rs {
		if !r.Is4() || !r.IsValid() {
			continue
		}
		from, to := r.From.As4(), r.To.As4()
		lo := uint64(from[0])<<16 | uint64(from[1])<<8 | uint64(from[2])
		hi := uint64(to[0])<<16 | uint64(to[1])<<8 | uint64(to[2])
		n += hi - lo + 1
	}
	return n
}
