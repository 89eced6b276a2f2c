package etcdhealth

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// Source is what the monitor asks: store.Client for an external etcd,
// store.Embedded for the member in this process.
type Source interface {
	Health(ctx context.Context) (store.Health, error)
	Defragment(ctx context.Context, endpoint string) error
}

// Options tunes a Monitor.
type Options struct {
	// QuotaBytes is the backend quota etcd runs with (its
	// --quota-backend-bytes), exported beside the sizes.
	QuotaBytes int64
	// DefragFreeFraction, if positive, lets the monitor defragment a
	// member whose backend file is at least this share free pages (and at
	// least DefragMinBytes large). Zero: never (external etcd, whose
	// operators defragment it; docs/operating.md).
	DefragFreeFraction float64
	// DefragMinBytes is the smallest backend worth defragmenting (default
	// 64 MiB).
	DefragMinBytes int64
	// DefragEvery is the least time between two defragmentations (default
	// 1h): a member answers nothing while it is defragmented.
	DefragEvery time.Duration
	// Interval is how often the backend is checked (default 1 minute).
	Interval time.Duration
	// Meter, if set, receives the gauges.
	Meter metric.Meter
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Monitor checks etcd's backend periodically.
type Monitor struct {
	src    Source
	logger *slog.Logger
	opts   Options

	mu         sync.Mutex
	last       store.Health
	lastDefrag time.Time
}

// New returns a Monitor; call Run to start checking.
func New(src Source, logger *slog.Logger, opts Options) *Monitor {
	if opts.DefragMinBytes <= 0 {
		opts.DefragMinBytes = 64 << 20
	}
	if opts.DefragEvery <= 0 {
		opts.DefragEvery = time.Hour
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Monitor{src: src, logger: logger, opts: opts}
	if opts.Meter != nil {
		m.observe(opts.Meter)
	}
	return m
}

// Run checks the backend every Interval until ctx is done.
func (m *Monitor) Run(ctx context.Context) error {
	t := time.NewTicker(m.opts.Interval)
	defer t.Stop()
	for {
		if err := m.Check(ctx); err != nil && ctx.Err() == nil {
			m.logger.WarnContext(ctx, "etcd backend check failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Check reads the backend's health once, warns of a NOSPACE alarm or a
// backend past 80% of its quota, and defragments at most one member that
// needs it (see Options).
func (m *Monitor) Check(ctx context.Context) error {
	h, err := m.src.Health(ctx)
	m.mu.Lock()
	m.last = h
	m.mu.Unlock()
	if err != nil {
		return err
	}
	if h.NoSpace {
		m.logger.ErrorContext(ctx, "etcd raised NOSPACE: it refuses every write until defragmented and the alarm disarmed (docs/operating.md, \"etcd maintenance\")", "alarms", h.Alarms)
	}
	for _, mem := range h.Members {
		if q := m.opts.QuotaBytes; q > 0 && mem.DBSize > q/10*8 {
			m.logger.WarnContext(ctx, "etcd backend past 80% of its quota", "endpoint", mem.Endpoint, "db_size", mem.DBSize, "in_use", mem.DBSizeInUse, "quota", q)
		}
	}
	return m.defragOne(ctx, h)
}

// defragOne defragments the member most in need of it, if one is and the
// last defragmentation is long enough ago.
func (m *Monitor) defragOne(ctx context.Context, h store.Health) error {
	if m.opts.DefragFreeFraction <= 0 {
		return nil
	}
	now := m.opts.Now()
	m.mu.Lock()
	recent := !m.lastDefrag.IsZero() && now.Sub(m.lastDefrag) < m.opts.DefragEvery
	m.mu.Unlock()
	if recent {
		return nil
	}
	var pick *store.MemberStatus
	for i, mem := range h.Members {
		if mem.DBSize < m.opts.DefragMinBytes || mem.FreeFraction() < m.opts.DefragFreeFraction {
			continue
		}
		if pick == nil || mem.FreeFraction() > pick.FreeFraction() {
			pick = &h.Members[i]
		}
	}
	if pick == nil {
		return nil
	}
	m.mu.Lock()
	m.lastDefrag = now
	m.mu.Unlock()
	start := time.Now()
	m.logger.InfoContext(ctx, "defragmenting etcd member", "endpoint", pick.Endpoint, "db_size", pick.DBSize, "in_use", pick.DBSizeInUse)
	if err := m.src.Defragment(ctx, pick.Endpoint); err != nil {
		return err
	}
	m.logger.InfoContext(ctx, "etcd member defragmented", "endpoint", pick.Endpoint, "took", time.Since(start))
	return nil
}

// observe exports the last check as gauges.
func (m *Monitor) observe(meter metric.Meter) {
	size, err1 := meter.Int64ObservableGauge("beacon.etcd.db_size_bytes", metric.WithDescription("Size of each etcd member's backend file: what counts against the quota"))
	inUse, err2 := meter.Int64ObservableGauge("beacon.etcd.db_size_in_use_bytes", metric.WithDescription("Part of each etcd member's backend file holding live data (the rest is free pages a defragmentation returns)"))
	quota, err3 := meter.Int64ObservableGauge("beacon.etcd.quota_bytes", metric.WithDescription("The backend quota etcd runs with (--etcd-quota-bytes); past it etcd raises NOSPACE and refuses writes"))
	noSpace, err4 := meter.Int64ObservableGauge("beacon.etcd.alarm_nospace", metric.WithDescription("1 while etcd's NOSPACE alarm is raised"))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		m.logger.Warn("etcd metrics unavailable", "error", err)
		return
	}
	_, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		m.mu.Lock()
		h := m.last
		m.mu.Unlock()
		for _, mem := range h.Members {
			attrs := metric.WithAttributes(attribute.String("endpoint", mem.Endpoint))
			o.ObserveInt64(size, mem.DBSize, attrs)
			o.ObserveInt64(inUse, mem.DBSizeInUse, attrs)
		}
		if m.opts.QuotaBytes > 0 {
			o.ObserveInt64(quota, m.opts.QuotaBytes)
		}
		var ns int64
		if h.NoSpace {
			ns = 1
		}
		o.ObserveInt64(noSpace, ns)
		return nil
	}, size, inUse, quota, noSpace)
	if err != nil {
		m.logger.Warn("etcd metrics unavailable", "error", err)
	}
}
