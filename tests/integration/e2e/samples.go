package e2e

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Samples are measured durations.
type Samples []time.Duration

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100), or 0
// when there are no samples.
func (s Samples) Percentile(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	rank := int(math.Ceil(p / 100 * float64(len(c))))
	return c[min(max(rank, 1), len(c))-1]
}

func (s Samples) String() string {
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", len(s), ms(s.Percentile(50)), ms(s.Percentile(99)), ms(s.Percentile(100)))
}

// Millis is d in milliseconds, for BENCH lines.
func Millis(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

func ms(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
