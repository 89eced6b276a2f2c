package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPercentile(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		ps     []float64
		want   []time.Duration
	}{
		{"empty", nil, []float64{0, 50, 99, 100}, ms(0, 0, 0, 0)},
		{"one", ms(7), []float64{0, 1, 50, 99, 100}, ms(7, 7, 7, 7, 7)},
		{"two", ms(1, 2), []float64{0, 50, 50.1, 99, 100}, ms(1, 1, 2, 2, 2)},
		{"ten", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), []float64{10, 50, 90, 91, 99, 100}, ms(1, 5, 9, 10, 10, 10)},
		{"hundred", ms(hundred...), []float64{1, 50, 99, 99.5, 100}, ms(1, 50, 99, 100, 100)},
		{"out of range", ms(1, 2, 3), []float64{-5, 250}, ms(1, 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []time.Duration
			for _, p := range tt.ps {
				got = append(got, Percentile(tt.sorted, p))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("percentiles %v (-want +got):\n%s", tt.ps, diff)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	lat := []time.Duration{5 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond}
	got := summarize(lat, 2*time.Second)
	want := Stats{Ops: 4, Elapsed: 2 * time.Second, P50: 2 * time.Millisecond, P99: 5 * time.Millisecond, Max: 5 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summarize (-want +got):\n%s", diff)
	}
	if got, want := got.OpsPerSec(), 2.0; got != want {
		t.Errorf("OpsPerSec = %v, want %v", got, want)
	}
	if got := (Stats{}).OpsPerSec(); got != 0 {
		t.Errorf("OpsPerSec of nothing = %v, want 0", got)
	}
}

func TestFigureLines(t *testing.T) {
	figs := []Figure{
		{"alloc_throughput_c64", 1234.5678, UnitOpsPerSec},
		{"alloc_throughput_ratio_c1", 0.45678, UnitRatio},
		{"alloc_p50_latency_c1", 812.04, UnitMicros},
		{"free_search_v4_16_full", 35.25, UnitNsPerOp},
		{"big", 123456789012, UnitOpsPerSec}, // never in exponent form
		{"nan", math.NaN(), UnitRatio},
		{"inf", math.Inf(1), UnitRatio},
	}
	var b strings.Builder
	if err := WriteLines(&b, figs); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"BENCH alloc_throughput_c64 1234.6 ops/s",
		"BENCH alloc_throughput_ratio_c1 0.457 ratio",
		"BENCH alloc_p50_latency_c1 812.0 us",
		"BENCH free_search_v4_16_full 35.2 ns/op",
		"BENCH big 123456789012.0 ops/s",
		"BENCH nan 0.000 ratio",
		"BENCH inf 0.000 ratio",
		"",
	}
	if diff := cmp.Diff(want, strings.Split(b.String(), "\n")); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	for _, l := range want[:len(want)-1] {
		if f := strings.Fields(l); len(f) != 4 || f[0] != "BENCH" {
			t.Errorf("line %q is not BENCH <name> <value> <unit>", l)
		}
	}
}

func TestLoadFigures(t *testing.T) {
	raw := map[int]Stats{
		1:  {Ops: 1000, Elapsed: time.Second, P50: 500 * time.Microsecond},
		64: {Ops: 4000, Elapsed: time.Second},
	}
	beacon := map[int]Stats{
		1:  {Ops: 500, Elapsed: time.Second, P50: 1500 * time.Microsecond},
		64: {Ops: 2000, Elapsed: time.Second, P99: 20 * time.Millisecond},
	}
	want := []Figure{
		{"alloc_throughput_c1", 500, UnitOpsPerSec},
		{"raw_etcd_txn_c1", 1000, UnitOpsPerSec},
		{"alloc_throughput_ratio_c1", 0.5, UnitRatio},
		{"alloc_throughput_c64", 2000, UnitOpsPerSec},
		{"raw_etcd_txn_c64", 4000, UnitOpsPerSec},
		{"alloc_throughput_ratio_c64", 0.5, UnitRatio},
		{"alloc_p50_latency_c1", 1500, UnitMicros},
		{"alloc_p50_latency_ratio_c1", 3, UnitRatio},
		{"alloc_p99_latency_c64", 20000, UnitMicros},
	}
	if diff := cmp.Diff(want, loadFigures([]int{1, 64}, raw, beacon)); diff != "" {
		t.Errorf("loadFigures (-want +got):\n%s", diff)
	}
}

func TestSplitDuration(t *testing.T) {
	type split struct {
		N    int
		Each time.Duration
	}
	tests := []struct {
		d, slice time.Duration
		want     split
	}{
		{5 * time.Second, time.Second, split{5, time.Second}},
		{300 * time.Millisecond, time.Second, split{1, 300 * time.Millisecond}},
		{2500 * time.Millisecond, time.Second, split{3, 2500 * time.Millisecond / 3}},
	}
	for _, tt := range tests {
		n, each := splitDuration(tt.d, tt.slice)
		if diff := cmp.Diff(tt.want, split{n, each}); diff != "" {
			t.Errorf("splitDuration(%v, %v) (-want +got):\n%s", tt.d, tt.slice, diff)
		}
	}
}

// The linear baseline and the free list find the same lowest address.
func TestFreeFixtures(t *testing.T) {
	v4, err := v4FullFixture()
	if err != nil {
		t.Fatal(err)
	}
	if got := v4.free.Count().Int64(); got != v4Free {
		t.Errorf("v4 fixture has %d free, want %d", got, v4Free)
	}
	if got := len(v4.used); got != 1<<16-v4Free {
		t.Errorf("v4 fixture has %d used, want %d", got, 1<<16-v4Free)
	}
	want, ok := v4.free.Lowest()
	got, ok2 := linearLowest(v4.from, v4.to, v4.used)
	if !ok || !ok2 || got != want {
		t.Errorf("linear lowest %v %v, free list lowest %v %v", got, ok2, want, ok)
	}
	v6, err := v6Fixture()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(v6.used); got != v6Taken {
		t.Errorf("v6 fixture has %d used, want %d", got, v6Taken)
	}
	want, _ = v6.free.Lowest()
	if got, _ := linearLowest(v6.from, v6.to, v6.used); got != want {
		t.Errorf("v6: linear lowest %v, free list lowest %v", got, want)
	}
}
