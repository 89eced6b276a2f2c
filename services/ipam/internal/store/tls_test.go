package store

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/beaconlb/beacon/pkg/devcerts"
)

// An etcd that requires TLS client certificates, as production clusters
// do: Dial with the CA and a client certificate works; without the
// certificate, or without the CA, every call fails.
func TestDialTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := devcerts.NewCA("etcd test CA")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	srvCert, srvKey, err := ca.Server("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cliCert, cliKey, err := ca.Client("beacon://ipamd")
	if err != nil {
		t.Fatal(err)
	}
	caFile := write("ca.pem", ca.CertPEM())
	srv := transport.TLSInfo{CertFile: write("server.pem", srvCert), KeyFile: write("server-key.pem", srvKey), TrustedCAFile: caFile, ClientCertAuth: true}
	cliCertFile, cliKeyFile := write("client.pem", cliCert), write("client-key.pem", cliKey)

	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir, cfg.LogLevel = "tls", filepath.Join(dir, "etcd"), "error"
	cu, _ := url.Parse("https://127.0.0.1:0")
	pu, _ := url.Parse("http://127.0.0.1:0")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ClientTLSInfo = srv
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready")
	}
	endpoint := "https://" + e.Clients[0].Addr().String()

	try := func(caFile, cert, key string) error {
		t.Helper()
		tc, err := ClientTLS(caFile, cert, key)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := Dial(ctx, DialConfig{Endpoints: []string{endpoint}, TLS: tc})
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_, err = c.etcd.Put(ctx, "/beacon/tls-test", "1")
		return err
	}
	if err := try(caFile, cliCertFile, cliKeyFile); err != nil {
		t.Fatalf("with the CA and a client certificate: %v", err)
	}
	if err := try(caFile, "", ""); err == nil {
		t.Error("without a client certificate: the write succeeded")
	}
	if err := try("", cliCertFile, cliKeyFile); err == nil {
		t.Error("without the CA: the write succeeded")
	}
	if _, err := ClientTLS(filepath.Join(dir, "missing.pem"), "", ""); err == nil {
		t.Error("ClientTLS with a missing CA file: no error")
	}
}
