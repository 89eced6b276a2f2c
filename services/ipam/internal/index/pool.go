package index

import (
	"math/big"
	"net/netip"

	"github.com/beaconlb/beacon/services/ipam/internal/addrspace"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// poolEntry is a pool with its address space and free lists.
type poolEntry struct {
	pool  *ipam.Pool
	rev   int64
	space *addrspace.Space
	free4 *addrspace.FreeList
	free6 *addrspace.FreeList
	// used4 and used6 count the claimed addresses inside space, so that
	// usage is O(1) whatever the pool holds.
	used4, used6 uint64
	// x is the index, for the pool's held addresses (see LowestHeldN).
	x *Index
}

// buildPool makes the entry of a pool: its free lists are its space less
// the addresses claimed or reserved in it. Cost: O(claims), all pools' (the
// index keeps no per-pool set of claims: at a million, that set cost as
// much memory as the claims' own map); a pool changes rarely, and a load
// builds the pools before their claims arrive (Replace).
func (x *Index) buildPool(p *ipam.Pool, rev int64) *poolEntry {
	space, err := addrspace.NewSpace(p.Ranges, p.Exclusions, p.AvoidBuggyIPs)
	if err != nil {
		// Pools are validated before they are stored; an empty space keeps
		// the replica serving the others.
		space, _ = addrspace.NewSpace(nil, nil, false)
	}
	e := &poolEntry{
		pool:  p,
		rev:   rev,
		space: space,
		free4: space.FreeList(true),
		free6: space.FreeList(false),
		x:     x,
	}
	for a, c := range x.claims {
		if c.c.Pool == p.Name {
			e.take(a)
			e.count(a, true)
		}
	}
	for a := range x.reserved {
		if space.Contains(a) {
			e.free(a).Take(a)
		}
	}
	return e
}

func (e *poolEntry) free(a netip.Addr) *addrspace.FreeList {
	if a.Is4() {
		return e.free4
	}
	return e.free6
}

// take marks a claimed address used.
func (e *poolEntry) take(a netip.Addr) {
	if !e.space.Contains(a) {
		return
	}
	e.free(a).Take(a)
}

// give returns an address to the free list.
func (e *poolEntry) give(a netip.Addr) {
	if !e.space.Contains(a) {
		return
	}
	e.free(a).Put(a)
}

// count adds (or with claimed false removes) a claimed address to the
// usage counters, if it is inside the pool's space.
func (e *poolEntry) count(a netip.Addr, claimed bool) {
	if !e.space.Contains(a) {
		return
	}
	n := &e.used6
	if a.Is4() {
		n = &e.used4
	}
	if claimed {
		*n++
	} else if *n > 0 {
		*n--
	}
}

func (e *poolEntry) hasFamily(f ipam.Family) bool {
	return e.space.HasFamily(f == ipam.IPv4)
}

// lowestN returns the n lowest free addresses of family f, or false.
func (e *poolEntry) lowestN(f ipam.Family, n int) ([]netip.Addr, bool) {
	if f == ipam.IPv4 {
		return e.free4.LowestN(n)
	}
	return e.free6.LowestN(n)
}

func (e *poolEntry) lowest(f ipam.Family) (netip.Addr, bool) {
	if f == ipam.IPv4 {
		return e.free4.Lowest()
	}
	return e.free6.Lowest()
}

// Usage is the usage of one family of a pool.
type Usage struct {
	Family ipam.Family
	Size   *big.Int
	Used   uint64
	Free   *big.Int
}

// Usage returns the usage of a pool per family it has: size of its space,
// addresses claimed (held ones included) and free.
func (x *Index) Usage(name string) []Usage {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.pools[name]
	if !ok {
		return nil
	}
	var out []Usage
	for _, f := range []ipam.Family{ipam.IPv4, ipam.IPv6} {
		if !e.hasFamily(f) {
			continue
		}
		is4 := f == ipam.IPv4
		used := e.used6
		if is4 {
			used = e.used4
		}
		size := e.space.Size(is4)
		free := new(big.Int).Sub(size, new(big.Int).SetUint64(used))
		out = append(out, Usage{Family: f, Size: size, Used: used, Free: free})
	}
	return out
}

// Overlapping returns the name of an indexed pool other than name whose
// ranges overlap ranges, with the overlapping part.
func (x *Index) Overlapping(name string, ranges []addrspace.Range) (string, addrspace.Range, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range x.sortedPools() {
		if p.Name == name {
			continue
		}
		if r, ok := addrspace.Overlap(p.Ranges, ranges); ok {
			return p.Name, r, true
		}
	}
	return "", addrspace.Range{}, false
}

// ClaimsInPool returns the addresses claimed in a pool. Cost: O(claims).
func (x *Index) ClaimsInPool(name string) []netip.Addr {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []netip.Addr
	for a, c := range x.claims {
		if c.c.Pool == name {
			out = append(out, a)
		}
	}
	return out
}

// PoolNames returns the names of the indexed pools, sorted.
func (x *Index) PoolNames() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]string, 0, len(x.pools))
	for _, p := range x.sortedPools() {
		out = append(out, p.Name)
	}
	return out
}
