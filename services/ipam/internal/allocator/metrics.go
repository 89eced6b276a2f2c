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
}

func newMetrics(m metric.Meter) metrics {
	if m == nil {
		m = noop.NewMeterProvider().Meter("")
	}
	ops, _ := m.Int64Counter("beacon.ipam.operations",
		metric.WithDescription("IPAM write operations by operation and outcome"))
	conflicts, _ := m.Int64Counter("beacon.ipam.conflicts",
		metric.WithDescription("Commits that lost to a concurrent change and were planned again"))
	return metrics{ops: ops, conflicts: conflicts}
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

func (m metrics) record(ctx context.Context, op string, err error) {
	m.ops.Add(ctx, 1, metric.WithAttributes(attribute.String("op", op), attribute.String("outcome", outcome(err))))
}
