// Package telemetry owns how a Beacon binary observes itself: it builds the
// OpenTelemetry MeterProvider (exported as Prometheus text through a private
// registry), the TracerProvider (exported over OTLP/gRPC when configured), the
// W3C propagator, the gRPC stats handlers wired to those providers, and the
// process's JSON slog logger.
//
// Nothing here touches process-wide state: no otel.Set* calls, no
// prometheus.DefaultRegisterer, no init(). Callers pass the providers (or the
// options built from them) to whatever needs them.
package telemetry
