package proxy

import (
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/health" // client-side health checking of the replicas
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/beaconlb/beacon/pkg/grpcserve"
)

// backendServiceConfig balances calls round-robin over the replicas whose
// connection is up and whose grpc.health.v1 status is SERVING: a replica
// that dies drops out when its connection breaks, one that shuts down
// gracefully as soon as it reports NOT_SERVING.
const backendServiceConfig = `{
  "loadBalancingConfig": [{"round_robin": {}}],
  "healthCheckConfig": {"serviceName": ""}
}`

// DialIPAM returns a connection to the IPAM replicas at addrs (host:port
// each), balanced client-side over the healthy ones, with the proxy's
// Codec forced so that Frames pass through undecoded. It does not wait for
// a replica to answer.
func DialIPAM(addrs []string, creds credentials.TransportCredentials, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if len(addrs) == 0 {
		return nil, errors.New("proxy: no IPAM address")
	}
	r := manual.NewBuilderWithScheme("beacon-ipam")
	var st resolver.State
	for _, a := range addrs {
		st.Endpoints = append(st.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}})
	}
	r.InitialState(st)
	base := []grpc.DialOption{
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultServiceConfig(backendServiceConfig),
		grpc.WithDefaultCallOptions(
			grpc.ForceCodecV2(Codec()),
			grpc.MaxCallRecvMsgSize(grpcserve.MaxSendMsgSize),
			grpc.MaxCallSendMsgSize(grpcserve.MaxRecvMsgSize),
		),
		// Above the IPAM's KeepaliveMinTime, so it never hangs up on us.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 15 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
		// Come back quickly to a replica that restarted.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	}
	conn, err := grpc.NewClient("beacon-ipam:///ipam", append(base, opts...)...)
	if err != nil {
		return nil, err
	}
	conn.Connect()
	return conn, nil
}
