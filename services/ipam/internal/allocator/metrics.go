package allocator

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// metrics are the allocator's instruments.
type metrics struct {
	ops       metric.Int64Counter
	conflicts metric.Int64Counter
	// attrs holds the attribute sets of the known operations and outcomes,
	// built once: building one per call costs more than the rest of the
	// recording.
	attrs map[[2]string]metric.AddOption
}

// The operations and outcomes the allocator records.
var (
	metricOps      = []string{"allocate", "allocate_existing", "release", "renew", "update", "expire"}
	metricOutcomes = []string{"ok", "exhausted", "refused", "error"}
)

func newMetrics(m metric.Meter) metrics {
	if m == nil {
		m = noop.NewMeterProvider().Meter("")
	}
	ops, _ := m.Int64Counter("beacon.ipam.operations",
		metric.WithDescription("IPAM write operations by operation and outcome"))
	conflicts, _ := m.Int64Counter("beacon.ipam.conflicts",
		metric.WithDescription("Commits that lost to a concurrent change and were planned again"))
	attrs := make(map[[2]string]metric.AddOption, len(metricOps)*len(metricOutcomes))
	for _, op := range metricOps {
		for _, o := range metricOutcomes {
			attrs[[2]string{op, o}] = opAttrs(op, o)
		}
	}
	return metrics{ops: ops, conflicts: conflicts, attrs: attrs}
}

// outcome names the result of an operation for metrics.
func outcome(err error) string {
	var r *ipam.Refusal
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ipam.ErrPoolExhausted):
		return "exhausted"
	case errors.As(err, &r):
		return "refused"
	default:
		return "error"
	}
}

func opAttrs(op, outcome string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("op", op), attribute.String("outcome", outcome)))
}

func (m metrics) record(ctx context.Context, op string, err error) {
	o := outcome(err)
	a, ok := m.attrs[[2]string{op, o}]
	if !ok {
		a = opAttrs(op, o)
	}
	m.ops.Add(ctx, 1, a)
}
