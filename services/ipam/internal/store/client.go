package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Client is a connection to etcd: over the network (Dial), or straight
// into an etcd server in this process (Embedded.Client). Other packages
// hold one without importing etcd.
type Client struct {
	etcd *clientv3.Client
	// kv is etcd's KV service on the same connection, for transactions the
	// store builds as protobuf messages.
	kv etcdserverpb.KVClient
	// kvServer, for an etcd in this process, is its KV service, called
	// directly for RangeStream (which kv, there, does not carry); noStream
	// is set once etcd refused RangeStream (before 3.7). See scan.
	kvServer etcdserverpb.KVServer
	noStream atomic.Bool
	// keeper sends the leases' keep-alives (nil: clientv3's, a stream
	// each).
	keeper *keeper
	// With several endpoints, transactions go to the leader's (leader.go).
	leaderState
	// closed is set by Close: transactions no longer go to the leader's
	// connection, which the store closes only when it stops.
	closed atomic.Bool
}

// Close closes the connection. Nothing is written through the Client
// after it, not even over the connection to the etcd leader that its
// store keeps open until it stops: a replica whose etcd connection is cut
// as a killed process's is (the scale benchmark's crash) must not go on
// deleting its nodes' registrations while its announcers' streams end.
func (c *Client) Close() error {
	c.closed.Store(true)
	return c.etcd.Close()
}

// Etcd returns the etcd client itself, for benchmarks and tests that write
// to etcd behind the store's back.
func (c *Client) Etcd() *clientv3.Client { return c.etcd }

// DialConfig says how to reach etcd.
type DialConfig struct {
	Endpoints []string
	// TLS, if set, is used for every connection (https:// endpoints): the
	// CA that etcd's certificate chains to, and a client certificate when
	// etcd requires one (--client-cert-auth).
	TLS *tls.Config
	// Username and Password, if set, authenticate to etcd (etcd's own auth).
	Username, Password string
}

// Dial connects to etcd over the network.
func Dial(ctx context.Context, dc DialConfig) (*Client, error) {
	cfg := clientv3.Config{
		Endpoints:            dc.Endpoints,
		TLS:                  dc.TLS,
		Username:             dc.Username,
		Password:             dc.Password,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Context:              ctx,
		MaxCallRecvMsgSize:   64 << 20,
		// The client's own retries are logged by zap at warn level; the
		// store reports the errors that matter itself.
		Logger: zap.NewNop(),
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connect to etcd %v: %w: %w", dc.Endpoints, ipam.ErrUnavailable, err)
	}
	cfg.Context = nil
	leases := etcdserverpb.NewLeaseClient(c.ActiveConnection())
	cl := &Client{etcd: c, kv: etcdserverpb.NewKVClient(c.ActiveConnection()), keeper: newKeeper(func(context.Context) etcdserverpb.LeaseClient { return leases })}
	cl.initLeaderState(cfg)
	return cl, nil
}

// ClientTLS builds the TLS configuration for etcd from PEM files: caFile
// (empty: the system's roots) and, optionally, a client certificate and key.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("store: etcd CA: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("store: etcd CA %s: no certificates", caFile)
		}
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("store: etcd client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
