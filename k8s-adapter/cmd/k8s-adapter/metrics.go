package main

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/metric"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
)

// observe exports the controller's counters as OpenTelemetry instruments
// read at each collection.
func observe(m metric.Meter, c *kube.Controller) error {
	reconciles, err1 := m.Int64ObservableCounter("beacon.k8s.reconciles", metric.WithDescription("Service reconcile passes"))
	failures, err2 := m.Int64ObservableCounter("beacon.k8s.reconcile_failures", metric.WithDescription("Service reconcile passes that failed and were queued again"))
	queued, err3 := m.Int64ObservableGauge("beacon.k8s.queue_depth", metric.WithDescription("Services waiting to be reconciled"))
	leading, err4 := m.Int64ObservableGauge("beacon.k8s.leading", metric.WithDescription("1 while this replica holds the Lease"))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := c.Stats()
		o.ObserveInt64(reconciles, int64(s.Reconciles))
		o.ObserveInt64(failures, int64(s.Failures))
		o.ObserveInt64(queued, int64(s.Queued))
		l := int64(0)
		if s.Leading {
			l = 1
		}
		o.ObserveInt64(leading, l)
		return nil
	}, reconciles, failures, queued, leading)
	return err
}
