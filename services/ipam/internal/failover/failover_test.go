package failover

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestQuantile(t *testing.T) {
	gaps := func(ms ...int) []Gap {
		var out []Gap
		for _, m := range ms {
			out = append(out, Gap{Gap: time.Duration(m) * time.Millisecond})
		}
		return out
	}
	thirty := make([]int, 30)
	for i := range thirty {
		thirty[i] = 30 - i // 30..1, unsorted
	}
	for _, tc := range []struct {
		name string
		gaps []Gap
		q    float64
		want time.Duration
	}{
		{"none", nil, 0.99, 0},
		{"one", gaps(7), 0.5, 7 * time.Millisecond},
		{"median of four is the second", gaps(4, 1, 3, 2), 0.5, 2 * time.Millisecond},
		{"p99 of 30 is the largest", gaps(thirty...), 0.99, 30 * time.Millisecond},
		{"p50 of 30 is the 15th", gaps(thirty...), 0.5, 15 * time.Millisecond},
		{"max", gaps(5, 9, 1), 1, 9 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, Quantile(tc.gaps, tc.q)); d != "" {
				t.Errorf("Quantile(%v) (-want +got):\n%s", tc.q, d)
			}
		})
	}
}
