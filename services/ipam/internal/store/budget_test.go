package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// bigAllocation is a change writing one allocation whose endpoint nodes
// take about size bytes.
func bigAllocation(id string, size int) ipam.Change {
	ref := ipam.Ref{Kind: ipam.KindAllocation, ID: "t/" + id}
	a := &ipam.Allocation{Tenant: "t", ID: id, Owner: id}
	node := strings.Repeat("n", 250)
	for i := 0; i*256 < size; i++ {
		a.EndpointNodes = append(a.EndpointNodes, fmt.Sprintf("%s%05d", node, i))
	}
	return ipam.Change{Conds: []ipam.Cond{{Ref: ref}}, Puts: []ipam.Put{{Ref: ref, Value: a}}}
}

// Large changes committed together are packed into transactions etcd
// accepts (at most --max-request-bytes, 1.5 MiB by default): none fails
// because of the others. A change etcd could never accept alone fails
// with ipam.ErrTooLarge, and only that change.
//
// With a budget above etcd's limit, etcd's refusal splits a batch instead:
// the outcome is the same.
func TestGroupCommitBudgetsBytesAndOperations(t *testing.T) {
	for _, maxBytes := range []int{0, 64 << 20} {
		t.Run(fmt.Sprintf("MaxBytes=%d", maxBytes), func(t *testing.T) { testBudgets(t, maxBytes) })
	}
}

func testBudgets(t *testing.T, maxBytes int) {
	s, ctx := newStore(t)
	if maxBytes > 0 {
		s = New(&Client{etcd: s.client, kv: s.conn.kv}, s.logger, Options{Workers: 2, MaxBytes: maxBytes})
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Run(rctx) }()
		t.Cleanup(func() { stop(); <-done })
	}
	const writers = 24
	var wg sync.WaitGroup
	errs := make([]error, writers+2)
	for i := range writers {
		wg.Go(func() {
			_, _, errs[i] = s.Commit(ctx, bigAllocation(fmt.Sprintf("big%d", i), 300<<10))
		})
	}
	wg.Go(func() { _, _, errs[writers] = s.Commit(ctx, bigAllocation("huge", 2<<20)) })
	wg.Go(func() {
		var ch ipam.Change
		for i := range s.opts.MaxOps + 1 {
			ch.Puts = append(ch.Puts, claimChange(fmt.Sprintf("198.51.100.%d", i%256), 0).Puts...)
		}
		_, _, errs[writers+1] = s.Commit(ctx, ch)
	})
	wg.Wait()
	for i, err := range errs[:writers] {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	for i, what := range []string{"a change over the byte budget", "a change over the operation budget"} {
		err := errs[writers+i]
		var r *ipam.Refusal
		if !errors.Is(err, ipam.ErrTooLarge) || !errors.As(err, &r) {
			t.Errorf("%s: %v, want a refusal of ipam.ErrTooLarge", what, err)
		}
	}
}
