package telemetry

import (
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
)

func (t *Telemetry) otelgrpcOptions() []otelgrpc.Option {
	return []otelgrpc.Option{
		otelgrpc.WithTracerProvider(t.TracerProvider),
		otelgrpc.WithMeterProvider(t.MeterProvider),
		otelgrpc.WithPropagators(t.Propagator),
	}
}

// GRPCServerOptions instruments a gRPC server with this Telemetry's
// providers and propagator: a server span per RPC (child of the caller's
// span when the request carries trace context) and the
// rpc.server.call.duration histogram.
func (t *Telemetry) GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.StatsHandler(otelgrpc.NewServerHandler(t.otelgrpcOptions()...)),
	}
}

// GRPCDialOptions instruments a gRPC client likewise: a client span per RPC
// whose context is injected into the request metadata, and the
// rpc.client.call.duration histogram.
func (t *Telemetry) GRPCDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(t.otelgrpcOptions()...)),
	}
}
