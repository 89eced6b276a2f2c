package addrspace

import (
	"errors"
	"math/big"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go4.org/netipx"
)

// checkInvariants verifies that f's fragments are valid, of f's family,
// sorted, disjoint and non-adjacent, and that Count and Lowest agree with
// them.
func checkInvariants(t testing.TB, f *FreeList) {
	t.Helper()
	rs := f.Ranges()
	total := new(big.Int)
	for i, r := range rs {
		if !r.IsValid() || r.From().Is4() != f.Is4() {
			t.Fatalf("fragment %d %v invalid or of the wrong family", i, r)
		}
		if i > 0 {
			prev := rs[i-1].To()
			if !prev.Less(r.From()) || prev.Next() == r.From() {
				t.Fatalf("fragments %v and %v overlap, touch or are unsorted", rs[i-1], r)
			}
		}
		// Not Range.Size: IPv6 fragments may start or end at IPv4-mapped
		// addresses, which a Range rejects.
		total.Add(total, spanSize(u128Of(r.From()), u128Of(r.To())))
	}
	if got := f.Count(); got.Cmp(total) != 0 {
		t.Fatalf("Count() = %v, fragments hold %v", got, total)
	}
	if f.Fragments() != len(rs) {
		t.Fatalf("Fragments() = %d, want %d", f.Fragments(), len(rs))
	}
	low, ok := f.Lowest()
	if ok != (len(rs) > 0) || (ok && low != rs[0].From()) {
		t.Fatalf("Lowest() = %v, %v; fragments %v", low, ok, rs)
	}
}

// model is the obvious reference free list: a set of addresses.
type model map[netip.Addr]bool

func (m model) sorted() []netip.Addr {
	out := make([]netip.Addr, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// expand lists every address of f; only for small lists.
func expand(f *FreeList) []netip.Addr {
	out := []netip.Addr{}
	for _, r := range f.Ranges() {
		for a := r.From(); ; a = a.Next() {
			out = append(out, a)
			if a == r.To() {
				break
			}
		}
	}
	return out
}

// compare checks f against m completely.
func compare(t testing.TB, f *FreeList, m model) {
	t.Helper()
	checkInvariants(t, f)
	if diff := cmp.Diff(m.sorted(), expand(f), addrCmp()); diff != "" {
		t.Fatalf("free list differs from model (-model +list):\n%s", diff)
	}
}

func mustFreeList(t testing.TB, is4 bool, ss ...string) *FreeList {
	t.Helper()
	f, err := NewFreeList(is4, ipRanges(t, ss...))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestNewFreeList(t *testing.T) {
	tests := []struct {
		name  string
		is4   bool
		in    []string
		want  []string
		count *big.Int
	}{
		{"empty v4", true, nil, []string{}, big.NewInt(0)},
		{"empty v6", false, nil, []string{}, big.NewInt(0)},
		{"unsorted overlapping adjacent", true,
			[]string{"192.0.2.128/25", "192.0.2.5", "192.0.2.0-192.0.2.4", "192.0.2.6-192.0.2.9", "192.0.2.200", "10.0.0.0/31"},
			[]string{"10.0.0.0/31", "192.0.2.0-192.0.2.9", "192.0.2.128/25"}, big.NewInt(2 + 10 + 128)},
		{"contained", true, []string{"192.0.2.0/24", "192.0.2.7"}, []string{"192.0.2.0/24"}, big.NewInt(256)},
		{"whole v4", true, []string{"0.0.0.0/1", "128.0.0.0/1"}, []string{"0.0.0.0/0"}, pow2(32)},
		{"whole v6", false, []string{"8000::/1", "::/1"}, []string{"::/0"}, pow2(128)},
		{"v6 /64 and /48", false, []string{"2001:db8::/64", "2001:db8:1::/48"},
			[]string{"2001:db8::/64", "2001:db8:1::/48"}, new(big.Int).Add(pow2(64), pow2(80))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustFreeList(t, tt.is4, tt.in...)
			checkInvariants(t, f)
			if diff := cmp.Diff(tt.want, rangeStrings(f.Ranges())); diff != "" {
				t.Errorf("ranges (-want +got):\n%s", diff)
			}
			if got := f.Count(); got.Cmp(tt.count) != 0 {
				t.Errorf("Count() = %v, want %v", got, tt.count)
			}
		})
	}
}

func TestNewFreeListErrors(t *testing.T) {
	tests := []struct {
		name string
		is4  bool
		in   []netipx.IPRange
		want error
	}{
		{"invalid", true, []netipx.IPRange{{}}, ErrInvalidRange},
		{"v6 in v4 list", true, ipRanges(t, "192.0.2.0/24", "2001:db8::/64"), ErrMixedFamily},
		{"v4 in v6 list", false, ipRanges(t, "192.0.2.0/24"), ErrMixedFamily},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewFreeList(tt.is4, tt.in); !errors.Is(err, tt.want) || !errors.Is(err, ErrInvalidRange) {
				t.Errorf("NewFreeList() error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestFreeListTakePutMerging(t *testing.T) {
	f := mustFreeList(t, true, "192.0.2.0-192.0.2.9")
	steps := []struct {
		op   string // "take" or "put"
		a    string
		ok   bool
		want []string
	}{
		{"take", "192.0.2.5", true, []string{"192.0.2.0-192.0.2.4", "192.0.2.6-192.0.2.9"}},
		{"take", "192.0.2.5", false, []string{"192.0.2.0-192.0.2.4", "192.0.2.6-192.0.2.9"}},
		{"take", "192.0.2.0", true, []string{"192.0.2.1-192.0.2.4", "192.0.2.6-192.0.2.9"}},
		{"take", "192.0.2.9", true, []string{"192.0.2.1-192.0.2.4", "192.0.2.6-192.0.2.8"}},
		{"take", "192.0.2.10", false, []string{"192.0.2.1-192.0.2.4", "192.0.2.6-192.0.2.8"}},
		{"take", "::ffff:192.0.2.1", false, []string{"192.0.2.1-192.0.2.4", "192.0.2.6-192.0.2.8"}},
		{"put", "192.0.2.1", false, []string{"192.0.2.1-192.0.2.4", "192.0.2.6-192.0.2.8"}},
		{"put", "192.0.2.5", true, []string{"192.0.2.1-192.0.2.8"}}, // joins both neighbours
		{"put", "192.0.2.0", true, []string{"192.0.2.0-192.0.2.8"}}, // joins the right one
		{"put", "192.0.2.9", true, []string{"192.0.2.0-192.0.2.9"}},
		{"put", "192.0.2.11", true, []string{"192.0.2.0-192.0.2.9", "192.0.2.11"}}, // new fragment
		{"put", "192.0.2.10", true, []string{"192.0.2.0-192.0.2.11"}},
		{"put", "192.0.2.12", true, []string{"192.0.2.0-192.0.2.12"}},
		{"put", "2001:db8::1", false, []string{"192.0.2.0-192.0.2.12"}},
		{"take", "192.0.2.12", true, []string{"192.0.2.0-192.0.2.11"}},
		{"take", "192.0.2.8", true, []string{"192.0.2.0/29", "192.0.2.9-192.0.2.11"}},
		{"take", "192.0.2.10", true, []string{"192.0.2.0/29", "192.0.2.9", "192.0.2.11"}},
		{"put", "10.0.0.1", true, []string{"10.0.0.1", "192.0.2.0/29", "192.0.2.9", "192.0.2.11"}}, // new lowest
		{"take", "10.0.0.1", true, []string{"192.0.2.0/29", "192.0.2.9", "192.0.2.11"}},
		{"take", "192.0.2.9", true, []string{"192.0.2.0/29", "192.0.2.11"}}, // fragment disappears
	}
	for i, st := range steps {
		a := mustAddr(t, st.a)
		var ok bool
		if st.op == "take" {
			ok = f.Take(a)
		} else {
			ok = f.Put(a)
		}
		if ok != st.ok {
			t.Fatalf("step %d: %s(%s) = %v, want %v", i, st.op, st.a, ok, st.ok)
		}
		checkInvariants(t, f)
		if diff := cmp.Diff(st.want, rangeStrings(f.Ranges())); diff != "" {
			t.Fatalf("step %d: %s(%s): ranges (-want +got):\n%s", i, st.op, st.a, diff)
		}
	}
}

func TestFreeListBoundaries(t *testing.T) {
	tests := []struct {
		name   string
		is4    bool
		ranges []string
		addrs  []string // taken in this order, then put back in reverse
	}{
		{"v4 top", true, []string{"255.255.255.250-255.255.255.255"},
			[]string{"255.255.255.255", "255.255.255.254", "255.255.255.252", "255.255.255.250", "255.255.255.251", "255.255.255.253"}},
		{"v4 bottom", true, []string{"0.0.0.0-0.0.0.5"},
			[]string{"0.0.0.0", "0.0.0.1", "0.0.0.5", "0.0.0.3", "0.0.0.2", "0.0.0.4"}},
		{"v4 whole", true, []string{"0.0.0.0/0"},
			[]string{"0.0.0.0", "255.255.255.255", "128.0.0.0", "127.255.255.255"}},
		{"v6 top", false, []string{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc/126"},
			[]string{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffd",
				"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffc", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"}},
		{"v6 bottom", false, []string{"::/126"}, []string{"::", "::2", "::3", "::1"}},
		{"v6 whole", false, []string{"::/0"},
			[]string{"::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "::ffff:0:0", "0:0:0:1::", "0:0:0:0:ffff:ffff:ffff:ffff"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustFreeList(t, tt.is4, tt.ranges...)
			start := f.Count()
			want := new(big.Int).Set(start)
			for _, s := range tt.addrs {
				a := mustAddr(t, s)
				if !f.Contains(a) || !f.Take(a) || f.Contains(a) || f.Take(a) {
					t.Fatalf("Take(%s) misbehaved", a)
				}
				want.Sub(want, big.NewInt(1))
				checkInvariants(t, f)
				if f.Count().Cmp(want) != 0 {
					t.Fatalf("after Take(%s) Count = %v, want %v", a, f.Count(), want)
				}
			}
			for _, s := range slices.Backward(tt.addrs) {
				a := mustAddr(t, s)
				if !f.Put(a) || !f.Contains(a) || f.Put(a) {
					t.Fatalf("Put(%s) misbehaved", a)
				}
				checkInvariants(t, f)
			}
			if diff := cmp.Diff(tt.ranges, rangeStrings(f.Ranges())); diff != "" {
				t.Errorf("after take and put back (-want +got):\n%s", diff)
			}
			if f.Count().Cmp(start) != 0 {
				t.Errorf("Count = %v, want %v", f.Count(), start)
			}
		})
	}
}

func TestFreeListEmptyAndZero(t *testing.T) {
	var zero FreeList // an empty IPv6 list
	if _, ok := zero.Lowest(); ok || zero.Is4() || zero.Count().Sign() != 0 || zero.Take(mustAddr(t, "::")) {
		t.Fatal("zero FreeList is not an empty IPv6 list")
	}
	if !zero.Put(mustAddr(t, "::")) || zero.Put(mustAddr(t, "192.0.2.1")) {
		t.Fatal("Put on zero FreeList")
	}
	checkInvariants(t, &zero)

	f := mustFreeList(t, true, "192.0.2.1")
	for _, a := range []netip.Addr{{}, mustAddr(t, "fe80::1%eth0"), mustAddr(t, "::ffff:192.0.2.1")} {
		if f.Take(a) || f.Put(a) || f.Contains(a) {
			t.Errorf("address %v accepted", a)
		}
	}
	if !f.Take(mustAddr(t, "192.0.2.1")) {
		t.Fatal("Take failed")
	}
	if _, ok := f.Lowest(); ok || f.Fragments() != 0 || f.Count().Sign() != 0 {
		t.Error("list not empty after taking its only address")
	}
}

func TestFreeListClone(t *testing.T) {
	f := mustFreeList(t, true, "192.0.2.0/30")
	c := f.Clone()
	c.Take(mustAddr(t, "192.0.2.1"))
	if !f.Contains(mustAddr(t, "192.0.2.1")) || f.Fragments() != 1 || c.Fragments() != 2 {
		t.Error("Clone shares state")
	}
}

// TestFreeListModel runs random Take/Put/Contains/Lowest sequences on small
// pools against the map model, with fixed seeds so failures reproduce.
func TestFreeListModel(t *testing.T) {
	bases := []string{"192.0.2.0", "0.0.0.0", "255.255.255.192", "2001:db8::", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffc0"}
	for seed := uint64(1); seed <= 30; seed++ {
		for _, base := range bases {
			rng := rand.New(rand.NewPCG(seed, 0x5eed))
			b := mustAddr(t, base)
			const universe = 64
			addrAt := func(i int) netip.Addr {
				a := b
				for range i {
					a = a.Next()
				}
				return a
			}
			// Start from a random subset given as (possibly overlapping) ranges.
			m := model{}
			var in []netipx.IPRange
			for range rng.IntN(6) {
				lo := rng.IntN(universe)
				hi := lo + rng.IntN(universe-lo)
				in = append(in, netipx.IPRangeFrom(addrAt(lo), addrAt(hi)))
				for i := lo; i <= hi; i++ {
					m[addrAt(i)] = true
				}
			}
			f, err := NewFreeList(b.Is4(), in)
			if err != nil {
				t.Fatal(err)
			}
			compare(t, f, m)
			for step := range 400 {
				a := addrAt(rng.IntN(universe))
				switch op := rng.IntN(4); op {
				case 0, 1:
					if got, want := f.Take(a), m[a]; got != want {
						t.Fatalf("seed %d base %s step %d: Take(%s) = %v, want %v", seed, base, step, a, got, want)
					}
					delete(m, a)
				case 2:
					if got, want := f.Put(a), !m[a]; got != want {
						t.Fatalf("seed %d base %s step %d: Put(%s) = %v, want %v", seed, base, step, a, got, want)
					}
					m[a] = true
				case 3:
					if got, want := f.Contains(a), m[a]; got != want {
						t.Fatalf("seed %d base %s step %d: Contains(%s) = %v, want %v", seed, base, step, a, got, want)
					}
					// Allocate the lowest, as the allocator does.
					if low, ok := f.Lowest(); ok {
						if want := m.sorted()[0]; low != want {
							t.Fatalf("Lowest() = %s, want %s", low, want)
						}
						f.Take(low)
						delete(m, low)
					}
				}
				checkInvariants(t, f)
			}
			compare(t, f, m)
		}
	}
}

// TestFreeListModelLarge churns a list of hundreds of fragments, so that
// inserts and removals shift both the low and the high side and the buffer
// grows, and checks it against the map model.
func TestFreeListModelLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 2000))
	base := mustAddr(t, "10.0.0.0")
	const universe = 2000
	f := mustFreeList(t, true, "10.0.0.0-10.0.7.207") // 2000 addresses
	m := model{}
	at := func(i int) netip.Addr { return u128Of(base).add(u128{lo: uint64(i)}).addr(true) }
	for i := range universe {
		m[at(i)] = true
	}
	for step := range 40000 {
		a := at(rng.IntN(universe))
		if rng.IntN(2) == 0 {
			if got, want := f.Take(a), m[a]; got != want {
				t.Fatalf("step %d: Take(%s) = %v, want %v", step, a, got, want)
			}
			delete(m, a)
		} else {
			if got, want := f.Put(a), !m[a]; got != want {
				t.Fatalf("step %d: Put(%s) = %v, want %v", step, a, got, want)
			}
			m[a] = true
		}
		if step%1000 == 0 {
			checkInvariants(t, f)
		}
	}
	if f.Fragments() < 100 {
		t.Errorf("only %d fragments: the test does not churn a large list", f.Fragments())
	}
	compare(t, f, m)
}
