package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Units of figures.
const (
	UnitOpsPerSec = "ops/s"
	UnitMicros    = "us"
	UnitNsPerOp   = "ns/op"
	UnitRatio     = "ratio"
)

// Figure is one measured number.
type Figure struct {
	Name  string
	Value float64
	Unit  string
}

// Line formats f as "BENCH <name> <value> <unit>": ratios with three
// decimals, everything else with one, never in exponent form.
func (f Figure) Line() string {
	prec := 1
	if f.Unit == UnitRatio {
		prec = 3
	}
	v := f.Value
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0
	}
	return "BENCH " + f.Name + " " + strconv.FormatFloat(v, 'f', prec, 64) + " " + f.Unit
}

// WriteLines writes the BENCH line of each figure.
func WriteLines(w io.Writer, figs []Figure) error {
	var b strings.Builder
	for _, f := range figs {
		b.WriteString(f.Line())
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Percentile returns the p-th percentile (0 < p <= 100) of sorted latencies
// by the nearest-rank method: the smallest value such that at least p% of
// the values are at or below it. It returns 0 for no values, and the
// smallest value for p <= 0.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if p <= 0 {
		return sorted[0]
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	return sorted[min(max(rank, 1), n)-1]
}

// Stats summarises one load measurement.
type Stats struct {
	Ops     int
	Elapsed time.Duration
	P50     time.Duration
	P99     time.Duration
	Max     time.Duration
	// OpsPerTxn is how many operations each etcd transaction carried on
	// average (0: unknown).
	OpsPerTxn float64
}

// OpsPerSec is the throughput.
func (s Stats) OpsPerSec() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Ops) / s.Elapsed.Seconds()
}

// summarize sorts lat in place and summarises it.
func summarize(lat []time.Duration, elapsed time.Duration) Stats {
	slices.Sort(lat)
	s := Stats{Ops: len(lat), Elapsed: elapsed, P50: Percentile(lat, 50), P99: Percentile(lat, 99)}
	if len(lat) > 0 {
		s.Max = lat[len(lat)-1]
	}
	return s
}

// micros converts a duration to microseconds.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// ratio returns a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// tableRow is one line of the human table.
type tableRow struct {
	what string
	c    int
	s    Stats
}

// writeTable writes the load measurements as an aligned table.
func writeTable(w io.Writer, rows []tableRow) {
	fmt.Fprintf(w, "%-9s %4s %10s %10s %10s %10s %10s %8s\n", "target", "c", "ops", "ops/s", "p50 us", "p99 us", "max us", "ops/txn")
	for _, r := range rows {
		fmt.Fprintf(w, "%-9s %4d %10d %10.1f %10.1f %10.1f %10.1f %8.2f\n",
			r.what, r.c, r.s.Ops, r.s.OpsPerSec(), micros(r.s.P50), micros(r.s.P99), micros(r.s.Max), r.s.OpsPerTxn)
	}
}
