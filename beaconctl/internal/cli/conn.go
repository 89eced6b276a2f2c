package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// dial opens a client connection to the server named by the global flags.
// The connection is made lazily, on the first call.
func (g *globals) dial() (*grpc.ClientConn, error) {
	creds, err := g.transportCredentials()
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if g.token != "" {
		md := []string{"authorization", "Bearer " + g.token}
		opts = append(opts,
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				return invoker(metadata.AppendToOutgoingContext(ctx, md...), method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(metadata.AppendToOutgoingContext(ctx, md...), desc, cc, method, opts...)
			}),
		)
	}
	conn, err := grpc.NewClient(g.server, opts...)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", g.server, err)
	}
	return conn, nil
}

func (g *globals) transportCredentials() (credentials.TransportCredentials, error) {
	if !g.tls {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: g.insecureSkipVerify, //nolint:gosec // Only when the user asks for it.
	}
	if g.caFile != "" {
		pem, err := os.ReadFile(g.caFile)
		if err != nil {
			return nil, fmt.Errorf("reading CA file (%s): %w", g.caSource, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s (%s): no PEM certificates found", g.caFile, g.caSource)
		}
		cfg.RootCAs = pool
	}
	if g.certFile != "" {
		cert, err := tls.LoadX509KeyPair(g.certFile, g.keyFile)
		if err != nil {
			return nil, fmt.Errorf("loading the client certificate and key (%s): %w", g.certSource, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

// callContext bounds one call by --timeout.
func (g *globals) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if g.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, g.timeout)
}
