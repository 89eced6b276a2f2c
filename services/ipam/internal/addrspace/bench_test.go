package addrspace

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"go4.org/netipx"
)

// slash16Free returns the offsets, within a /16, of the 6 addresses left
// free by the V4 /16 benchmarks: "scattered" across the whole /16 (seeded),
// or "tail", all in its last 1 % (so the lowest free address is near the
// end, the worst case for a linear scan).
func slash16Free(kind string) []int {
	if kind == "tail" {
		return []int{65536 - 655, 65536 - 500, 65536 - 300, 65536 - 120, 65536 - 17, 65536 - 1}
	}
	rng := rand.New(rand.NewPCG(16, 6))
	var free []int
	for len(free) < 6 {
		if o := rng.IntN(1 << 16); !slices.Contains(free, o) {
			free = append(free, o)
		}
	}
	slices.Sort(free)
	return free
}

// BenchmarkFreeSearchV4Slash16Full: a /16 with all but 6 addresses taken;
// each iteration takes the lowest free address and puts it back.
func BenchmarkFreeSearchV4Slash16Full(b *testing.B) {
	base := netip.MustParseAddr("10.20.0.0")
	for _, kind := range []string{"scattered", "tail"} {
		b.Run(kind, func(b *testing.B) {
			free := slash16Free(kind)
			f := mustFreeList(b, true, "10.20.0.0/16")
			for i := range 1 << 16 {
				if !slices.Contains(free, i) && !f.Take(offset16(base, i)) {
					b.Fatal("setup Take failed")
				}
			}
			want := offset16(base, free[0])
			if f.Count().Int64() != 6 {
				b.Fatalf("Count = %v, want 6", f.Count())
			}
			for b.Loop() {
				a, ok := f.Lowest()
				if !ok || a != want || !f.Take(a) || !f.Put(a) {
					b.Fatalf("Lowest = %v, %v; want %v", a, ok, want)
				}
			}
			b.ReportMetric(float64(free[0]), "lowest-offset")
		})
	}
}

// BenchmarkLinearScanV4Slash16Full is the baseline for
// BenchmarkFreeSearchV4Slash16Full: a naive scan from the start of the /16
// over a map of used addresses, finding the same lowest free address.
func BenchmarkLinearScanV4Slash16Full(b *testing.B) {
	base := netip.MustParseAddr("10.20.0.0")
	for _, kind := range []string{"scattered", "tail"} {
		b.Run(kind, func(b *testing.B) {
			free := slash16Free(kind)
			used := make(map[netip.Addr]bool, 1<<16)
			for i := range 1 << 16 {
				if !slices.Contains(free, i) {
					used[offset16(base, i)] = true
				}
			}
			want := offset16(base, free[0])
			for b.Loop() {
				a := base
				for used[a] {
					a = a.Next()
				}
				if a != want {
					b.Fatalf("scan found %v, want %v", a, want)
				}
				used[a] = true
				delete(used, a)
			}
			b.ReportMetric(float64(free[0]), "lowest-offset")
		})
	}
}

// BenchmarkFreeSearchV6Slash64 takes the lowest free address of a /64 and
// puts it back, on a fresh /64 and on one with 10,000 addresses taken,
// scattered over its first 20,000 (about 10,000 fragments).
func BenchmarkFreeSearchV6Slash64(b *testing.B) {
	for _, taken := range []int{0, 10000} {
		name := "fresh"
		if taken > 0 {
			name = "10000-taken"
		}
		b.Run(name, func(b *testing.B) {
			f := mustFreeList(b, false, "2001:db8:0:1::/64")
			base := netip.MustParseAddr("2001:db8:0:1::")
			rng := rand.New(rand.NewPCG(64, 10000))
			offsets := rng.Perm(2 * taken)[:taken]
			slices.Sort(offsets) // ascending: each split is at the tail
			for _, o := range offsets {
				if !f.Take(offset64(base, o)) {
					b.Fatal("setup Take failed")
				}
			}
			for b.Loop() {
				a, ok := f.Lowest()
				if !ok || !f.Take(a) || !f.Put(a) {
					b.Fatal("take/put lowest failed")
				}
			}
			b.ReportMetric(float64(f.Fragments()), "fragments")
		})
	}
}

// BenchmarkNewSpaceAvoidBuggySlash8 measures building a /8 pool without its
// .0 and .255 addresses: 65,536 /24 blocks, each one fragment.
func BenchmarkNewSpaceAvoidBuggySlash8(b *testing.B) {
	ranges := []Range{mustRange(b, "10.0.0.0/8")}
	for b.Loop() {
		if _, err := NewSpace(ranges, nil, true); err != nil {
			b.Fatal(err)
		}
	}
}

func offset16(base netip.Addr, i int) netip.Addr {
	return u128Of(base).add(u128{lo: uint64(i)}).addr(true)
}

func offset64(base netip.Addr, i int) netip.Addr {
	return u128Of(base).add(u128{lo: uint64(i)}).addr(false)
}

// BenchmarkFreeListPutBelow returns addresses one by one below a list of
// 10,000 fragments, each becoming a new lowest fragment: the insert path at
// the low end, which must stay O(1) amortized rather than move every
// fragment.
func BenchmarkFreeListPutBelow(b *testing.B) {
	base := netip.MustParseAddr("2001:db8::")
	var in []netipx.IPRange
	for i := range 10000 {
		a := offset64(base, 1<<40+2*i)
		in = append(in, netipx.IPRangeFrom(a, a))
	}
	f, err := NewFreeList(false, in)
	if err != nil {
		b.Fatal(err)
	}
	next := 1 << 40
	for b.Loop() {
		next -= 2
		if !f.Put(offset64(base, next)) {
			b.Fatal("Put failed")
		}
	}
}
