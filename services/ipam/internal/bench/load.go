package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// opTimeout bounds one operation, so that a stuck etcd ends the run instead
// of hanging it.
const opTimeout = 30 * time.Second

// opFunc is one operation of a load: worker w's seq-th call. Each call must
// act on a key or owner no other call uses.
type opFunc func(ctx context.Context, w, seq int) error

// sample is the outcome of one measured window: the latency of each
// operation started in it, and how long it lasted.
type sample struct {
	lat     []time.Duration
	elapsed time.Duration
	// all counts every operation, warm-up included, and txns the etcd
	// transactions they committed (the revisions they added).
	all, txns int64
}

// add merges another window into s.
func (s *sample) add(o sample) {
	s.lat = append(s.lat, o.lat...)
	s.elapsed += o.elapsed
	s.all += o.all
	s.txns += o.txns
}

// stats summarises the sample.
func (s *sample) stats() Stats {
	st := summarize(s.lat, s.elapsed)
	st.OpsPerTxn = ratio(float64(s.all), float64(s.txns))
	return st
}

// runLoad runs op in c goroutines, each calling it back to back: first for
// warmup (not measured), then for d. Operations started in the measured
// window are counted and timed; the window ends when the last of them has
// finished. The first error stops every worker and is returned.
func runLoad(ctx context.Context, c int, warmup, d time.Duration, op opFunc) (sample, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	measureFrom := time.Now().Add(warmup)
	stopAt := measureFrom.Add(d)
	perWorker := make([][]time.Duration, c)
	var all atomic.Int64
	var wg sync.WaitGroup
	for w := range c {
		wg.Go(func() {
			for seq := 0; ctx.Err() == nil; seq++ {
				t0 := time.Now()
				if !t0.Before(stopAt) {
					return
				}
				opCtx, opCancel := context.WithTimeout(ctx, opTimeout)
				err := op(opCtx, w, seq)
				lat := time.Since(t0)
				opCancel()
				if err != nil {
					cancel(fmt.Errorf("worker %d, operation %d: %w", w, seq, err))
					return
				}
				all.Add(1)
				if !t0.Before(measureFrom) {
					perWorker[w] = append(perWorker[w], lat)
				}
			}
		})
	}
	wg.Wait()
	end := time.Now()
	if err := context.Cause(ctx); err != nil {
		return sample{}, err
	}
	var lats []time.Duration
	for _, l := range perWorker {
		lats = append(lats, l...)
	}
	return sample{lat: lats, elapsed: end.Sub(measureFrom), all: all.Load()}, nil
}
