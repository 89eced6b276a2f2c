// Package addrspace is the pure address-math core of the IPAM: it owns the
// parsing and canonical formatting of address ranges, the set of addresses a
// pool may hand out (ranges minus exclusions, optionally minus "buggy" IPv4
// addresses), and the mutable free list from which single addresses are
// allocated and to which they are returned. It does no I/O, keeps no global
// state and imports only the standard library and go4.org/netipx; addresses
// are net/netip values throughout and strings appear only in ParseRange and
// the String methods.
//
// Cost of each operation (n = number of ranges or fragments involved, never
// the number of addresses):
//
//   - ParseRange, Range.String: O(len(s)).
//   - Range.Contains, Range.Overlaps, Range.Is4, IsBuggy: O(1).
//   - Range.Size: O(1) plus one big.Int allocation.
//   - Overlap(a, b): O((len(a)+len(b)) log(len(a)+len(b))) to sort and merge
//     each list, then one linear sweep.
//   - NewSpace: O(n log n) in the number of ranges and exclusions (via
//     netipx.IPSetBuilder). With avoidBuggy, additionally O(k) in the number
//     k of /24 blocks touched by the IPv4 ranges: every /24 loses its .0 and
//     .255 addresses and becomes its own fragment .1–.254, so a /16 yields 256
//     fragments and a /8 65,536. Addresses are never enumerated.
//   - Space.Contains: O(log n). Space.Ranges: O(n) copy. Space.Size: O(1)
//     plus a big.Int allocation. Space.HasFamily: O(1). Space.FreeList: O(n).
//   - NewFreeList: O(n log n) to sort and merge its input.
//   - FreeList.Lowest, FreeList.Fragments: O(1).
//   - FreeList.Contains: O(log n) binary search.
//   - FreeList.Take, FreeList.Put: O(log n) binary search, plus, when a
//     fragment is split, created or removed, a memmove of the fragments on
//     the shorter side of it (32 bytes each): O(1) amortized near either end,
//     so taking the lowest address and putting it back stays O(1) however
//     fragmented the list is, and at worst n/2 fragments in the middle.
//   - FreeList.Count: O(1); the running count is kept as a 128-bit integer
//     and converted to a big.Int on demand, so a free IPv6 /64 (2^64) or
//     even the whole IPv6 space (2^128) is counted exactly.
//
// Finding the lowest free address and taking or returning one address never
// walks a pool address by address: their cost depends on the number of
// fragments, not on the size of the pool.
package addrspace
