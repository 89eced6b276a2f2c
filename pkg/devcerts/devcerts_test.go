package devcerts_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/pkg/devcerts"
)

func TestEnsureWritesAndReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	ids := []string{"beacon://admin", "beacon://tenant/c1"}
	p, err := devcerts.Ensure(dir, ids...)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{p.CAKey, p.ServerKey, p.Clients["beacon://admin"].Key, p.Clients["beacon://tenant/c1"].Key} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	if got := filepath.Base(p.Clients["beacon://tenant/c1"].Cert); got != "client-tenant-c1.pem" {
		t.Errorf("client file = %q", got)
	}
	caBefore, _ := os.ReadFile(p.CA)
	srvBefore, _ := os.ReadFile(p.ServerCert)

	// A second run keeps what is there and adds the new identity.
	p2, err := devcerts.Ensure(dir, append(ids, "beacon://viewer")...)
	if err != nil {
		t.Fatal(err)
	}
	caAfter, _ := os.ReadFile(p2.CA)
	srvAfter, _ := os.ReadFile(p2.ServerCert)
	if !bytes.Equal(caBefore, caAfter) || !bytes.Equal(srvBefore, srvAfter) {
		t.Error("Ensure remade an existing CA or server certificate")
	}
	leaf := readCert(t, p2.Clients["beacon://viewer"].Cert)
	var uris []string
	for _, u := range leaf.URIs {
		uris = append(uris, u.String())
	}
	if diff := cmp.Diff([]string{"beacon://viewer"}, uris); diff != "" {
		t.Errorf("URI SANs (-want +got):\n%s", diff)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caAfter)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify against the CA: %v", err)
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMutualTLSHandshake runs a real mutual TLS handshake over loopback with
// the certificates, as gatewayd and its clients use them.
func TestMutualTLSHandshake(t *testing.T) {
	ca, err := devcerts.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	srvCert, err := ca.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	cliCert, err := ca.ClientTLS("beacon://tenant/c1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{srvCert}, ClientCAs: ca.Pool(),
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			got <- err.Error()
			return
		}
		got <- tc.ConnectionState().VerifiedChains[0][0].URIs[0].String()
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{
		RootCAs: ca.Pool(), Certificates: []tls.Certificate{cliCert}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13,
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.Handshake()
	defer conn.Close()
	if g := <-got; g != "beacon://tenant/c1" {
		t.Fatalf("server saw %q", g)
	}
	// localhost by name too.
	if err := conn.ConnectionState().PeerCertificates[0].VerifyHostname("localhost"); err != nil {
		t.Error(err)
	}
	if !conn.ConnectionState().PeerCertificates[0].IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Error("server certificate lacks 127.0.0.1")
	}
}

func TestLoadCARejectsGarbage(t *testing.T) {
	if _, err := devcerts.LoadCA([]byte("nope"), []byte("nope")); err == nil {
		t.Fatal("LoadCA accepted garbage")
	}
}
