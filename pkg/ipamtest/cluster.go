package ipamtest

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/beaconlb/beacon/pkg/devcerts"
)

// TLS is how the replicas serve gRPC.
type TLS int

// The ways the replicas serve.
const (
	// Plaintext: no TLS and no client authentication (every caller is
	// let in, as ipamd without --tls-client-ca).
	Plaintext TLS = iota
	// ServerTLS: a server certificate from the IPAM's CA; no client
	// certificates asked for.
	ServerTLS
	// MutualTLS: as ServerTLS, and callers must present a client
	// certificate of the CA (--tls-client-ca): their SPIFFE ID is their
	// identity (docs/security.md).
	MutualTLS
)

// Admin is the identity Conn presents under MutualTLS.
const Admin = "spiffe://beacon/admin/ipamtest"

// Options are the replicas a test gets.
type Options struct {
	// Replicas is how many ipamd to start; 0 means 1.
	Replicas int
	// EtcdEndpoints, if set, is the etcd every replica uses (a real etcd
	// cluster, e.g. StartEtcd's); else the first replica runs an embedded
	// etcd in a temporary folder and the others use it.
	EtcdEndpoints string
	// TLS is how the replicas serve.
	TLS TLS
	// CA, if set, is the CA of the replicas' certificates (and of the
	// clients' under MutualTLS); else Start makes one.
	CA *devcerts.CA
	// Args are more flags for every replica, after the harness's own
	// (--release-hold 0s by default: pass --release-hold to change it).
	Args []string
}

// IPAM is the replicas a test started; they are killed when it ends.
type IPAM struct {
	// Replicas are the running replicas, in the order started.
	Replicas []*Replica
	// CA signs the replicas' server certificate and the clients' (nil
	// under Plaintext); CAFile holds its certificate.
	CA     *devcerts.CA
	CAFile string

	t    testing.TB
	bin  string
	args []string
	dir  string
	etcd string // Options.EtcdEndpoints
}

// Start starts o.Replicas replicas sharing one etcd, and kills them (and
// logs their output if the test failed) when the test ends.
func Start(t testing.TB, o Options) *IPAM {
	t.Helper()
	n := max(o.Replicas, 1)
	i := &IPAM{t: t, bin: mustBinary(t), dir: t.TempDir(), etcd: o.EtcdEndpoints}
	i.args = []string{"--release-hold", "0s"}
	if o.TLS != Plaintext {
		i.serveTLS(o.TLS, o.CA)
	}
	i.args = append(i.args, o.Args...)
	first := i.StartReplica(etcdArgs(o.EtcdEndpoints, filepath.Join(i.dir, "etcd"))...)
	endpoints := o.EtcdEndpoints
	if endpoints == "" {
		endpoints = first.EtcdEndpoints()
	}
	for range n - 1 {
		i.StartReplica("--etcd-endpoints", endpoints)
	}
	return i
}

func etcdArgs(endpoints, dataDir string) []string {
	if endpoints != "" {
		return []string{"--etcd-endpoints", endpoints}
	}
	return []string{"--data-dir", dataDir}
}

// serveTLS makes the CA and the server certificate and adds the flags.
func (i *IPAM) serveTLS(mode TLS, ca *devcerts.CA) {
	t := i.t
	t.Helper()
	if ca == nil {
		var err error
		if ca, err = devcerts.NewCA("ipamtest CA"); err != nil {
			t.Fatal(err)
		}
	}
	cert, key, err := ca.Server()
	if err != nil {
		t.Fatal(err)
	}
	i.CA, i.CAFile = ca, i.write("ca.pem", ca.CertPEM())
	i.args = append(i.args, "--tls-cert", i.write("server.pem", cert), "--tls-key", i.write("server-key.pem", key))
	if mode == MutualTLS {
		i.args = append(i.args, "--tls-client-ca", i.CAFile)
	}
}

func (i *IPAM) write(name string, b []byte) string {
	i.t.Helper()
	p := filepath.Join(i.dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		i.t.Fatal(err)
	}
	return p
}

// StartReplica starts one more replica with the IPAM's flags and args
// (such as --etcd-endpoints, or --listen to take a stopped replica's
// address), adds it to Replicas and kills it when the test ends.
func (i *IPAM) StartReplica(args ...string) *Replica {
	t := i.t
	t.Helper()
	r, err := StartReplica(t.Context(), i.bin, append(append([]string(nil), i.args...), args...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Kill()
		if t.Failed() {
			t.Logf("ipamd %s log:\n%s", r.Addr, r.Tail(8000))
		}
	})
	i.Replicas = append(i.Replicas, r)
	return r
}

// Addrs returns the replicas' gRPC addresses.
func (i *IPAM) Addrs() []string {
	out := make([]string, len(i.Replicas))
	for n, r := range i.Replicas {
		out[n] = r.Addr
	}
	return out
}

// Addr is the first replica's gRPC address.
func (i *IPAM) Addr() string { return i.Replicas[0].Addr }

// EtcdEndpoints are the etcd client URLs the replicas share.
func (i *IPAM) EtcdEndpoints() string {
	if i.etcd != "" {
		return i.etcd
	}
	return i.Replicas[0].EtcdEndpoints()
}

// ClientFiles writes a client certificate of the CA for identity (a
// SPIFFE ID, e.g. spiffe://beacon/admin/me) and returns its files.
func (i *IPAM) ClientFiles(identity string) (certFile, keyFile string) {
	t := i.t
	t.Helper()
	cert, key, err := i.CA.Client(identity)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(identity)
	return i.write(name+".pem", cert), i.write(name+"-key.pem", key)
}

// Credentials returns transport credentials for the replicas: plaintext,
// or TLS trusting the CA and, under MutualTLS, presenting identity's
// certificate (Admin when identity is empty).
func (i *IPAM) Credentials(identity string) credentials.TransportCredentials {
	t := i.t
	t.Helper()
	if i.CA == nil {
		return insecure.NewCredentials()
	}
	tc := &tls.Config{RootCAs: i.CA.Pool(), MinVersion: tls.VersionTLS12}
	if identity == "" {
		identity = Admin
	}
	cert, err := i.CA.ClientTLS(identity)
	if err != nil {
		t.Fatal(err)
	}
	tc.Certificates = []tls.Certificate{cert}
	return credentials.NewTLS(tc)
}

// Conn returns a connection to every replica (round robin) as identity
// (see Credentials); it is closed when the test ends.
func (i *IPAM) Conn(identity string, opts ...grpc.DialOption) *grpc.ClientConn {
	i.t.Helper()
	return Dial(i.t, i.Addrs(), i.Credentials(identity), opts...)
}

// Dial returns a connection to addrs with creds (round robin across them);
// it is closed when the test ends.
func Dial(t testing.TB, addrs []string, creds credentials.TransportCredentials, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := DialContext(addrs, creds, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// DialContext is Dial for code without a testing.TB (a TestMain, a
// benchmark); the caller closes the connection.
func DialContext(addrs []string, creds credentials.TransportCredentials, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, opts...)
	if len(addrs) == 1 {
		return grpc.NewClient(addrs[0], opts...)
	}
	r := manual.NewBuilderWithScheme("ipamtest")
	state := resolver.State{}
	for _, a := range addrs {
		state.Addresses = append(state.Addresses, resolver.Address{Addr: a})
	}
	r.InitialState(state)
	opts = append(opts, grpc.WithResolvers(r), grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`))
	return grpc.NewClient("ipamtest:///replicas", opts...)
}

// Conn is a plaintext connection to the replica; it is closed when the
// test ends.
func (r *Replica) Conn(t testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	return Dial(t, []string{r.Addr}, insecure.NewCredentials(), opts...)
}

// Serve is for the tests of a module sharing one replica from TestMain,
// where no testing.TB exists: it starts a replica with an embedded etcd in
// a temporary folder (and args; ipamd's own --release-hold unless given)
// and returns it and a stop function that stops it (SIGTERM, StopTimeout)
// and removes the folder.
func Serve(ctx context.Context, args ...string) (*Replica, func(), error) {
	bin, err := Binary()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "beacon-ipamtest-")
	if err != nil {
		return nil, nil, err
	}
	r, err := StartReplica(ctx, bin, append([]string{"--data-dir", dir}, args...)...)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	return r, func() { _ = r.Stop(StopTimeout); _ = os.RemoveAll(dir) }, nil
}
