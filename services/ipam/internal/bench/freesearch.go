package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/beaconlb/beacon/services/ipam/internal/addrspace"
)

// The free-search fixtures. 198.51.0.0/16 and 2001:db8::/64 are only values
// in memory here.
const (
	v4Range = "198.51.0.0/16"
	v4Free  = 6 // addresses left free in the /16
	v6Range = "2001:db8::/64"
	v6Taken = 10_000 // addresses taken in the /64...
	v6Among = 20_000 // ...scattered among its first this many
)

// freeFixture is a free list with some addresses taken, and the same state
// as a set of used addresses for the linear baseline.
type freeFixture struct {
	from, to netip.Addr
	free     *addrspace.FreeList
	used     map[netip.Addr]bool
}

// newFixture builds the free list of one range with the addresses at the
// offsets for which taken returns true taken. n is the number of offsets
// to consider from the start of the range.
func newFixture(rangeStr string, n int, taken func(off int) bool) (*freeFixture, error) {
	r, err := addrspace.ParseRange(rangeStr)
	if err != nil {
		return nil, err
	}
	sp, err := addrspace.NewSpace([]addrspace.Range{r}, nil, false)
	if err != nil {
		return nil, err
	}
	fx := &freeFixture{from: r.From, to: r.To, free: sp.FreeList(r.Is4()), used: make(map[netip.Addr]bool)}
	a := r.From
	for off := range n {
		if taken(off) {
			if !fx.free.Take(a) {
				return nil, fmt.Errorf("%s: could not take %s", rangeStr, a)
			}
			fx.used[a] = true
		}
		a = a.Next()
	}
	return fx, nil
}

// distinctOffsets returns k distinct pseudo-random offsets in [0, n), the
// same on every run.
func distinctOffsets(k, n int, seed uint64) map[int]bool {
	rng := rand.New(rand.NewPCG(seed, 0x1b0c))
	out := make(map[int]bool, k)
	for len(out) < k {
		out[rng.IntN(n)] = true
	}
	return out
}

// v4FullFixture is 198.51.0.0/16 with all but 6 scattered addresses taken.
func v4FullFixture() (*freeFixture, error) {
	free := distinctOffsets(v4Free, 1<<16, 16)
	return newFixture(v4Range, 1<<16, func(off int) bool { return !free[off] })
}

// v6Fixture is 2001:db8::/64 with 10,000 addresses taken, scattered among
// its first 20,000: the state after lowest-first allocation and random
// releases, with thousands of fragments.
func v6Fixture() (*freeFixture, error) {
	taken := distinctOffsets(v6Taken, v6Among, 64)
	return newFixture(v6Range, v6Among, func(off int) bool { return taken[off] })
}

// linearLowest is the naive baseline: scan the range from its start for
// the first address not in used.
func linearLowest(from, to netip.Addr, used map[netip.Addr]bool) (netip.Addr, bool) {
	for a := from; a.IsValid(); a = a.Next() {
		if !used[a] {
			return a, true
		}
		if a == to {
			break
		}
	}
	return netip.Addr{}, false
}

// benchFreeList finds the lowest free address, takes it and puts it back.
func benchFreeList(fx *freeFixture, failed *error) func(b *testing.B) {
	return func(b *testing.B) {
		for range b.N {
			a, ok := fx.free.Lowest()
			if !ok || !fx.free.Take(a) || !fx.free.Put(a) {
				*failed = fmt.Errorf("free list: lowest %s %v: take or put failed", a, ok)
				return
			}
		}
	}
}

// benchLinear does what benchFreeList does with the linear baseline.
func benchLinear(fx *freeFixture, failed *error) func(b *testing.B) {
	return func(b *testing.B) {
		for range b.N {
			a, ok := linearLowest(fx.from, fx.to, fx.used)
			if !ok {
				*failed = fmt.Errorf("linear: no free address")
				return
			}
			fx.used[a] = true
			delete(fx.used, a)
		}
	}
}

// nsPerOp runs one benchmark through testing.Benchmark.
func nsPerOp(name string, fn func(b *testing.B), failed *error, log io.Writer) (float64, error) {
	r := testing.Benchmark(fn)
	if *failed != nil {
		return 0, fmt.Errorf("%s: %w", name, *failed)
	}
	if r.N == 0 {
		return 0, fmt.Errorf("%s: benchmark did not run", name)
	}
	ns := float64(r.T.Nanoseconds()) / float64(r.N)
	fmt.Fprintf(log, "  %-32s %12d ops %14.1f ns/op\n", name, r.N, ns)
	return ns, nil
}

// freeSearch measures the lowest-free-address search.
func freeSearch(log io.Writer) ([]Figure, error) {
	v4, err := v4FullFixture()
	if err != nil {
		return nil, err
	}
	v6, err := v6Fixture()
	if err != nil {
		return nil, err
	}
	// Both searches must agree before they are compared.
	want, _ := v4.free.Lowest()
	if got, ok := linearLowest(v4.from, v4.to, v4.used); !ok || got != want {
		return nil, fmt.Errorf("free search: linear scan found %s, free list %s", got, want)
	}
	low6, _ := v6.free.Lowest()
	fmt.Fprintf(log, "free search: %s with %d free (%d fragments, lowest %s); %s with %d taken among the first %d (%d fragments, lowest %s)\n",
		v4Range, v4.free.Count(), v4.free.Fragments(), want, v6Range, v6Taken, v6Among, v6.free.Fragments(), low6)

	var failed error
	fl4, err := nsPerOp("free_search_v4_16_full", benchFreeList(v4, &failed), &failed, log)
	if err != nil {
		return nil, err
	}
	fl6, err := nsPerOp("free_search_v6_64", benchFreeList(v6, &failed), &failed, log)
	if err != nil {
		return nil, err
	}
	lin4, err := nsPerOp("free_search_linear_v4_16_full", benchLinear(v4, &failed), &failed, log)
	if err != nil {
		return nil, err
	}
	return []Figure{
		{"free_search_v4_16_full", fl4, UnitNsPerOp},
		{"free_search_v6_64", fl6, UnitNsPerOp},
		{"free_search_linear_v4_16_full", lin4, UnitNsPerOp},
		{"free_search_v4_16_full_vs_linear", ratio(lin4, fl4), UnitRatio},
	}, nil
}
