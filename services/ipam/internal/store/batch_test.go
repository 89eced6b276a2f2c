package store

import (
	"fmt"
	"testing"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Changes of one batch may put the same guard when they compare it at the
// same revision (it is then written once); anything else written twice
// keeps them apart.
func TestBatchFitsGuards(t *testing.T) {
	guard := ipam.Ref{Kind: ipam.KindTenantGuard, ID: "t1"}
	change := func(addr string, guardRev int64) *pending {
		t.Helper()
		claim := ipam.Ref{Kind: ipam.KindClaim, ID: addr}
		ch := ipam.Change{
			Conds: []ipam.Cond{{Ref: claim}, {Ref: guard, Rev: guardRev}},
			Puts:  []ipam.Put{{Ref: claim, Value: &ipam.Claim{Tenant: "t1"}}, {Ref: guard, Value: &ipam.TenantGuard{Tenant: "t1"}}},
		}
		prep, err := prepare(ch)
		if err != nil {
			t.Fatal(err)
		}
		return &pending{change: ch, prepared: prep}
	}
	for _, tc := range []struct {
		name  string
		first *pending
		next  *pending
		want  bool
	}{
		{"same guard, same revision", change("192.0.2.1", 7), change("192.0.2.2", 7), true},
		{"same guard, other revision", change("192.0.2.1", 7), change("192.0.2.2", 8), false},
		{"same guard, first write and later", change("192.0.2.1", 0), change("192.0.2.2", 7), false},
		{"same claim", change("192.0.2.1", 7), change("192.0.2.1", 7), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &batch{written: map[string]bool{}}
			b.add(tc.first)
			if got := b.fits(tc.next, 128, 1<<20); got != tc.want {
				t.Errorf("fits = %v, want %v", got, tc.want)
			}
		})
	}
	// A guard put by several changes is written once.
	b := &batch{written: map[string]bool{}}
	for i := range 3 {
		p := change(fmt.Sprintf("192.0.2.%d", i), 7)
		if !b.fits(p, 128, 1<<20) {
			t.Fatalf("change %d does not fit", i)
		}
		b.add(p)
	}
	s := &Store{opts: Options{MaxOps: 128}}
	req, err := s.txnRequest(t.Context(), b.items)
	if err != nil {
		t.Fatal(err)
	}
	puts := map[string]int{}
	for _, op := range req.Success {
		puts[string(op.GetRequestPut().GetKey())]++
	}
	if n := puts[key(guard)]; n != 1 {
		t.Errorf("guard written %d times, want once (puts %v)", n, puts)
	}
	if len(req.Compare) != 4 {
		t.Errorf("%d comparisons, want 4 (3 claims, the guard once)", len(req.Compare))
	}
}
