package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
	"github.com/beaconlb/beacon/pkg/devcerts"
	"github.com/beaconlb/beacon/pkg/ipamtest"
)

// unusedAddr is a loopback address where nothing listens.
func unusedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

func TestServerAndToken(t *testing.T) {
	f, addr := newIPAM(t).record(t)
	dead := unusedAddr(t)
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		wantAuth  []string
		wantError string
	}{
		{name: "server from env", env: map[string]string{EnvServer: addr}, args: []string{"--plaintext"}},
		{name: "flag wins over env", env: map[string]string{EnvServer: dead}, args: []string{"--plaintext", "--server", addr}},
		{name: "tls=false is plaintext", args: []string{"--tls=false", "--server", addr}},
		{name: "no token, no metadata", args: []string{"--plaintext", "--server", addr}},
		{name: "token from env", env: map[string]string{EnvServer: addr, EnvToken: "s3cret"}, args: []string{"--plaintext"}, wantAuth: []string{"Bearer s3cret"}},
		{name: "flag token wins", env: map[string]string{EnvServer: addr, EnvToken: "s3cret"}, args: []string{"--plaintext", "--token", "other"}, wantAuth: []string{"Bearer other"}},
		{name: "default server is the gateway", wantError: DefaultServer},
		{name: "plaintext default server is the local ipamd", args: []string{"--plaintext"}, wantError: DefaultPlaintextServer},
		{name: "nothing listening", args: []string{"--plaintext", "--server", dead}, wantError: "error: Unavailable: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantError == DefaultServer || tt.wantError == DefaultPlaintextServer {
				// Only meaningful if nothing listens there; skip rather
				// than talk to a real server.
				if c, err := net.DialTimeout("tcp", tt.wantError, time.Second); err == nil {
					c.Close()
					t.Skip("something listens on " + tt.wantError)
				}
			}
			before := len(f.recordedMetadata())
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res := run(ctx, tt.env, append(tt.args, "pool", "list")...)
			if tt.wantError != "" {
				if got := output.FormatError(res.err); !strings.Contains(got, tt.wantError) {
					t.Fatalf("error %q, want it to contain %q", got, tt.wantError)
				}
				return
			}
			if res.err != nil {
				t.Fatal(res.err)
			}
			mds := f.recordedMetadata()[before:]
			if len(mds) != 1 {
				t.Fatalf("%d calls reached the server, want 1", len(mds))
			}
			if diff := cmp.Diff(tt.wantAuth, mds[0].Get("authorization")); diff != "" {
				t.Errorf("authorization metadata (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTimeout calls a server that accepts the connection and never
// answers: a real socket with nothing behind it, as a hung server is.
func TestTimeout(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	start := time.Now()
	res := runAt(t, lis.Addr().String(), "--timeout", "200ms", "pool", "get", "web")
	if got := output.FormatError(res.err); !strings.HasPrefix(got, "error: DeadlineExceeded") {
		t.Errorf("error %q, want DeadlineExceeded", got)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the call took %v despite --timeout 200ms", d)
	}
}

// TestServerErrorDetails prints what a real IPAM says of requests it
// refuses: the status, each field violation, and the reason of a refusal.
func TestServerErrorDetails(t *testing.T) {
	ipam := newIPAM(t)
	ipam.pool("web", "198.51.100.0/28")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{
			name: "field violations",
			args: []string{"peer", "create", "tor1", "--tenant", "acme"},
			want: `error: InvalidArgument: bgp_peer.my_asn: is required (and 2 more)
  bgp_peer.my_asn: is required
  bgp_peer.peer_asn: is required
  bgp_peer.peer_address: is required`,
		},
		{
			name: "a refusal with its reason",
			args: []string{"pool", "create", "db", "--range", "198.51.100.8/29"},
			want: `error: FailedPrecondition: 198.51.100.8/29 overlaps pool "web"
  reason: POOL_OVERLAP`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runAt(t, ipam.addr, tt.args...)
			if diff := cmp.Diff(tt.want, output.FormatError(res.err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if res.stdout != "" || res.stderr != "" {
				t.Errorf("the command printed stdout %q, stderr %q; main prints the error", res.stdout, res.stderr)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"-o", "yaml", "version"}, `unknown output format "yaml"`},
		{[]string{"pool", "get"}, "beaconctl pool get: missing NAME\nRun 'beaconctl pool get --help' for usage"},
		{[]string{"pool", "get", "a", "b"}, `unexpected argument "b"`},
		{[]string{"pool", "list", "--bogus"}, "unknown flag: --bogus\nRun 'beaconctl pool list --help' for usage"},
		{[]string{"pool", "list", "--page-size", "-1"}, "--page-size must not be negative"},
		{[]string{"--timeout", "-1s", "pool", "list"}, "--timeout must not be negative"},
		{[]string{"--cert", "c.pem", "pool", "list"}, "--cert and --key must be given together"},
		{[]string{"--ca", "/nonexistent/ca.pem", "pool", "list"}, "reading CA file (--ca)"},
		{[]string{"alloc", "release", "default/web"}, "add --tenant"},
		{[]string{"alloc", "get", "x", "--tenant", "-"}, "cannot name one allocation"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
	}
	for _, tt := range tests {
		ctx := context.Background()
		res := run(ctx, map[string]string{EnvServer: unusedAddr(t)}, tt.args...)
		if res.err == nil || !strings.Contains(res.err.Error(), tt.wantErr) {
			t.Errorf("%v: error %v, want one containing %q", tt.args, res.err, tt.wantErr)
		}
	}
}

func TestVersion(t *testing.T) {
	res := run(context.Background(), nil, "version")
	if res.err != nil || !strings.HasPrefix(res.stdout, "beaconctl devel (go") {
		t.Errorf("version: %q, %v", res.stdout, res.err)
	}
	res = run(context.Background(), nil, "version", "-o", "name")
	if diff := cmp.Diff("devel\n", res.stdout); diff != "" || res.err != nil {
		t.Errorf("version -o name (-want +got): %v\n%s", res.err, diff)
	}
	res = run(context.Background(), nil, "version", "-o", "json")
	if res.err != nil || !strings.Contains(res.stdout, `"version": "devel"`) {
		t.Errorf("version -o json: %q, %v", res.stdout, res.err)
	}
	// --version prints the version command's line, with no server.
	want := run(context.Background(), nil, "version").stdout
	res = run(context.Background(), nil, "--version")
	if diff := cmp.Diff(want, res.stdout); diff != "" || res.err != nil {
		t.Errorf("--version (-want +got): %v\n%s", res.err, diff)
	}
}

// TestHelp checks that every command documents itself with an example, and
// that --help works without a server.
func TestHelp(t *testing.T) {
	root := NewRootCommand(Env{})
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" || c.HasParent() && c.Parent().Name() == "completion" {
			return
		}
		if c.Short == "" {
			t.Errorf("%s has no Short help", c.CommandPath())
		}
		if c.Example == "" {
			t.Errorf("%s has no Example", c.CommandPath())
		}
		c.LocalFlags().VisitAll(func(fl *pflag.Flag) {
			if fl.Usage == "" {
				t.Errorf("%s --%s has no help", c.CommandPath(), fl.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	res := run(context.Background(), nil, "alloc", "allocate", "--help")
	if res.err != nil || !strings.Contains(res.stdout, "Aliases:\n  allocate, create") || !strings.Contains(res.stdout, "--dual-stack POLICY") {
		t.Errorf("alloc allocate --help: %v\n%s", res.err, res.stdout)
	}
}

// testPKI writes a CA, a server certificate for 127.0.0.1 and a client
// certificate into dir.
type testPKI struct {
	caFile, certFile, keyFile string
	server                    tls.Certificate
	pool                      *x509.CertPool
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "beaconctl test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var pki testPKI
	pki.caFile = write("ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	srvCert, srvKey := issue(2, "ipamd", x509.ExtKeyUsageServerAuth)
	if pki.server, err = tls.X509KeyPair(srvCert, srvKey); err != nil {
		t.Fatal(err)
	}
	cliCert, cliKey := issue(3, "beaconctl", x509.ExtKeyUsageClientAuth)
	pki.certFile, pki.keyFile = write("client.pem", cliCert), write("client-key.pem", cliKey)
	pki.pool = x509.NewCertPool()
	pki.pool.AddCert(caCert)
	return pki
}

func TestTLS(t *testing.T) {
	// Two real replicas with certificates of one CA: one serving TLS, one
	// also asking for a client certificate (an admin's SPIFFE ID).
	ca, err := devcerts.NewCA("beaconctl test CA")
	if err != nil {
		t.Fatal(err)
	}
	tlsIPAM := ipamtest.Start(t, ipamtest.Options{TLS: ipamtest.ServerTLS, CA: ca})
	mtlsIPAM := ipamtest.Start(t, ipamtest.Options{TLS: ipamtest.MutualTLS, CA: ca})
	tlsAddr, mtlsAddr := tlsIPAM.Addr(), mtlsIPAM.Addr()
	var pki struct{ caFile, certFile, keyFile string }
	pki.caFile = tlsIPAM.CAFile
	pki.certFile, pki.keyFile = mtlsIPAM.ClientFiles("spiffe://beacon/admin/beaconctl")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{name: "ca", args: []string{"--server", tlsAddr, "--ca", pki.caFile}},
		{name: "tls with ca", args: []string{"--server", tlsAddr, "--tls", "--ca", pki.caFile}},
		{name: "skip verify", args: []string{"--server", tlsAddr, "--insecure-skip-verify"}},
		{name: "unknown CA", args: []string{"--server", tlsAddr, "--tls"}, wantErr: "Unavailable"},
		{name: "plaintext to TLS", args: []string{"--plaintext", "--server", tlsAddr}, wantErr: "Unavailable"},
		{name: "TLS is the default", args: []string{"--server", tlsAddr}, wantErr: "Unavailable"},
		{name: "ca from env", args: []string{"--server", tlsAddr}, env: map[string]string{EnvCA: pki.caFile}},
		{name: "client certificate from env", args: []string{"--server", mtlsAddr}, env: map[string]string{EnvCA: pki.caFile, EnvCert: pki.certFile, EnvKey: pki.keyFile}},
		{name: "client certificate", args: []string{"--server", mtlsAddr, "--ca", pki.caFile, "--cert", pki.certFile, "--key", pki.keyFile}},
		{name: "missing client certificate", args: []string{"--server", mtlsAddr, "--ca", pki.caFile}, wantErr: "Unavailable"},
		{name: "key is not a certificate", args: []string{"--server", mtlsAddr, "--ca", pki.keyFile}, wantErr: "no PEM certificates"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res := run(ctx, tt.env, append(tt.args, "pool", "list", "-o", "json")...)
			switch {
			case tt.wantErr == "" && res.err != nil:
				t.Fatalf("unexpected error: %s", output.FormatError(res.err))
			case tt.wantErr != "" && !strings.Contains(output.FormatError(res.err), tt.wantErr):
				t.Fatalf("error %v, want one containing %q", res.err, tt.wantErr)
			case tt.wantErr == "" && res.stdout != "[]\n":
				t.Errorf("stdout %q, want []", res.stdout)
			}
		})
	}
}
