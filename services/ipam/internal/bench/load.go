package bench

import (
	"context"
	"fmt"
	"sync"
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
}

// add merges another window into s.
func (s *sample) add(o sample) {
	s.lat = append(s.lat, o.lat...)
	s.elapsed += o.elapsed
}

// stats summarises the sample.
func (s *sample) stats() Stats { return summarize(s.lat, s.elapsed) }

// runLoad runs op in c goroutines, each calling it back to back: first for
// warmup (not measured), then for d. Operations started in the measured
// window are counted and timed; the window ends when the last of them has
// finished. The first error stops every worker and is returned.
func runLoad(ctx context.Context, c int, warmup, d time.Duration, op opFunc) (sample, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	measureFrom := time.Now().Add(warmup)
	stopAt := measureFrom.Add(d)
	lats := make([][]time.Duration, c)
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
				if !t0.Before(measureFrom) {
					lats[w] = append(lats[w], lat)
				}
			}
		})
	}
	wg.Wait()
	end := time.Now()
	if err := context.Cause(ctx); err != nil {
		return sample{}, err
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	return sample{lat: all, elapsed: end.Sub(measureFrom)}, nil
}
