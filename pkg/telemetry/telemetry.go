package telemetry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Config says how a binary's telemetry is set up.
type Config struct {
	// ServiceName is the service.name resource attribute (e.g. "ipamd").
	// Required.
	ServiceName string
	// ServiceVersion is the service.version resource attribute.
	ServiceVersion string
	// OTLPEndpoint is the host:port of an OTLP/gRPC collector. Empty means
	// traces are not exported; the TracerProvider still records spans so
	// trace context propagates across calls.
	OTLPEndpoint string
	// OTLPInsecure turns off TLS towards OTLPEndpoint.
	OTLPInsecure bool
	// TraceSampleRatio is the fraction of new traces sampled, in [0, 1];
	// 0 means 1.0. Sampling is parent-based: a span whose remote parent was
	// sampled is always sampled.
	TraceSampleRatio float64
}

// Telemetry holds the providers a binary hands to its components. Build it
// with New and release it with Shutdown.
type Telemetry struct {
	// MeterProvider creates the binary's metrics; they are exported through
	// Registry.
	MeterProvider *sdkmetric.MeterProvider
	// TracerProvider creates the binary's spans.
	TracerProvider *sdktrace.TracerProvider
	// Propagator carries W3C tracecontext and baggage across process
	// boundaries.
	Propagator propagation.TextMapPropagator
	// Registry is private to this Telemetry. Besides the MeterProvider's
	// metrics it has the Go runtime and process collectors; MetricsHandler
	// serves it.
	Registry *prometheus.Registry
}

// Option changes how New builds a Telemetry.
type Option func(*options)

type options struct {
	spanExporters []sdktrace.SpanExporter
}

// WithSpanExporter adds exp as a span exporter fed synchronously as each
// span ends (no batching), in addition to the OTLP exporter if one is
// configured. It is meant for tests (tracetest.InMemoryExporter) and for
// exporters that do their own buffering. Shutdown shuts exp down.
func WithSpanExporter(exp sdktrace.SpanExporter) Option {
	return func(o *options) { o.spanExporters = append(o.spanExporters, exp) }
}

// New builds the providers described by cfg. It starts no goroutine of its
// own, but when cfg.OTLPEndpoint is set the SDK's batch span processor runs
// one until Shutdown. New does not connect to the collector; export errors
// surface later through OpenTelemetry's error handler.
func New(ctx context.Context, cfg Config, opts ...Option) (*Telemetry, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	ratio, err := sampleRatio(cfg.TraceSampleRatio)
	if err != nil {
		return nil, err
	}
	if cfg.ServiceName == "" {
		return nil, errors.New("telemetry: ServiceName is required")
	}

	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, err
	}

	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, fmt.Errorf("telemetry: register Go collector: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, fmt.Errorf("telemetry: register process collector: %w", err)
	}
	promExp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(
		sdkmetric.WithResource(res),
		sdkmetric.WithReader(promExp),
	)

	tpOpts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	}
	if cfg.OTLPEndpoint != "" {
		exp, err := newOTLPExporter(ctx, cfg)
		if err != nil {
			return nil, errors.Join(err, shutdownWrap("meter provider", mp.Shutdown(ctx)))
		}
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
	}
	for _, exp := range o.spanExporters {
		tpOpts = append(tpOpts, sdktrace.WithSyncer(exp))
	}

	return &Telemetry{
		MeterProvider:  mp,
		TracerProvider: sdktrace.NewTracerProvider(tpOpts...),
		Propagator: propagation.NewCompositeTextMapPropagator(
			propagation.TraceContext{},
			propagation.Baggage{},
		),
		Registry: reg,
	}, nil
}

func sampleRatio(r float64) (float64, error) {
	switch {
	case math.IsNaN(r) || r < 0 || r > 1:
		return 0, fmt.Errorf("telemetry: TraceSampleRatio %v is outside [0, 1]", r)
	case r == 0:
		return 1, nil
	default:
		return r, nil
	}
}

func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	attrs := []resource.Option{
		// Environment first so that the explicit service attributes win
		// over OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES.
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(cfg.ServiceName)),
	}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(cfg.ServiceVersion)))
	}
	res, err := resource.New(ctx, attrs...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: build resource: %w", err)
	}
	return res, nil
}

func newOTLPExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(cfg.OTLPEndpoint)}
	if cfg.OTLPInsecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP trace exporter for %q: %w", cfg.OTLPEndpoint, err)
	}
	return exp, nil
}

// MetricsHandler serves the private Registry in the Prometheus exposition
// format. Collection errors are reported in
// promhttp_metric_handler_errors_total and the remaining metrics are still
// served.
func (t *Telemetry) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(t.Registry, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      t.Registry,
	})
}

// Shutdown flushes pending spans and stops both providers. It honours ctx's
// deadline; call it once, after the servers using the providers have stopped.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	return errors.Join(
		shutdownWrap("tracer provider", t.TracerProvider.Shutdown(ctx)),
		shutdownWrap("meter provider", t.MeterProvider.Shutdown(ctx)),
	)
}

// ShutdownWithin is Shutdown given at most d, for a binary's deferred
// shutdown at exit, when its own context is already done.
func (t *Telemetry) ShutdownWithin(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return t.Shutdown(ctx)
}

func shutdownWrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("telemetry: shut down %s: %w", what, err)
}
