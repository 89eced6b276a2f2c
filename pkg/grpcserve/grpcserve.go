// Package grpcserve owns the defaults every Beacon gRPC server is built
// with: message size limits, stream concurrency and keepalive policy. A
// server combines them with its own options (such as
// telemetry.Telemetry.GRPCServerOptions) in grpc.NewServer.
package grpcserve

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// The limits ServerOptions sets. Clients that expect responses larger than
// gRPC's default 4 MiB receive limit must raise theirs
// (grpc.MaxCallRecvMsgSize) up to MaxSendMsgSize; clients that send
// keepalive pings must do so no more often than KeepaliveMinTime.
const (
	MaxRecvMsgSize       = 4 << 20  // bytes a server accepts in one request message
	MaxSendMsgSize       = 16 << 20 // bytes a server sends in one response message
	MaxConcurrentStreams = 1024     // concurrent streams per client connection

	KeepaliveTime    = 30 * time.Second // server pings an idle connection after this
	KeepaliveTimeout = 10 * time.Second // and closes it if the ping is not answered within this
	KeepaliveMinTime = 10 * time.Second // clients pinging more often than this are disconnected

	// StreamWorkers is how many goroutines serve incoming streams and are
	// kept between them, so that a call does not start a goroutine and grow
	// its stack again (more calls at once still get goroutines of their own).
	StreamWorkers = 128
)

// ServerOptions returns the explicit limits every Beacon gRPC server uses,
// and its pool of stream workers.
// Keepalive pings are permitted on connections with no active stream.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxRecvMsgSize),
		grpc.MaxSendMsgSize(MaxSendMsgSize),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.NumStreamWorkers(StreamWorkers),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:    KeepaliveTime,
			Timeout: KeepaliveTimeout,
		}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             KeepaliveMinTime,
			PermitWithoutStream: true,
		}),
	}
}
