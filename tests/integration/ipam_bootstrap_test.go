package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/beaconlb/beacon/pkg/devcerts"
	"github.com/beaconlb/beacon/pkg/testwait"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/bootstrap"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// TestBootstrapToken: an admin makes a one-time bootstrap token with
// beaconctl; a node trades it (announcerd's own code, over TLS with no
// client certificate) for a certificate naming its node, which subscribes
// as that node only. The same token does not work twice, and an expired
// token is refused.
func TestBootstrapToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	p, err := devcerts.Ensure(filepath.Join(dir, "certs"), accessIDs["admin"])
	if err != nil {
		t.Fatal(err)
	}
	d := startIPAMD(t, "--data-dir", filepath.Join(dir, "data"),
		"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey, "--tls-client-ca", p.CA,
		"--node-issuer-cert", p.CA, "--node-issuer-key", p.CAKey, "--node-cert-validity", "48h")
	caPEM, _ := os.ReadFile(p.CA)
	keyPEM, _ := os.ReadFile(p.CAKey)
	ca, err := devcerts.LoadCA(caPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	adminCert, adminKey := devcerts.ClientFiles(accessIDs["admin"])
	bootstrapToken := func(node, valid string) string {
		cmd := exec.CommandContext(ctx, filepath.Join(binDir(t), "beaconctl"), "--server", d.grpc, "--ca", p.CA,
			"--cert", filepath.Join(dir, "certs", adminCert), "--key", filepath.Join(dir, "certs", adminKey),
			"certs", "bootstrap", "--tenant", accessTenant, "--node", node, "--valid", valid)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("beaconctl certs bootstrap: %v\n%s", err, stderr.String())
		}
		return strings.TrimSpace(stdout.String())
	}
	// A node's connection before it has a certificate: TLS that verifies
	// the IPAM, no client certificate.
	anon, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS13})))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = anon.Close() }()
	trade := func(certDir, token string) error {
		tf := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tf, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := bootstrap.Ensure(ctx, certDir, tf, []grpc.ClientConnInterface{anon}, slog.New(slog.DiscardHandler))
		return err
	}

	token := bootstrapToken(accessNode, "1h")
	certDir := filepath.Join(dir, "node")
	if err := trade(certDir, token); err != nil {
		t.Fatalf("first trade: %v", err)
	}
	for _, f := range []string{bootstrap.CertFile, bootstrap.KeyFile} {
		st, err := os.Stat(filepath.Join(certDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	certPath, keyPath := bootstrap.Paths(certDir)
	b, _ := os.ReadFile(certPath)
	blk, _ := pem.Decode(b)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if want := "spiffe://beacon/tenant/" + accessTenant + "/announcer/" + accessNode; len(cert.URIs) != 1 || cert.URIs[0].String() != want {
		t.Errorf("certificate URIs %v, want [%s]", cert.URIs, want)
	}
	if left := time.Until(cert.NotAfter); left < 47*time.Hour || left > 49*time.Hour {
		t.Errorf("certificate valid for %v more, want 48h (--node-cert-validity)", left)
	}
	// A certificate already there is kept: no second trade is tried.
	if err := trade(certDir, "beacon-bootstrap-unused"); err != nil {
		t.Errorf("with a valid certificate in place: %v", err)
	}

	// The same token again, for another directory: refused.
	if err := trade(filepath.Join(dir, "again"), token); status.Code(err) != codes.Unauthenticated {
		t.Errorf("second trade of one token: %v, want Unauthenticated", err)
	}
	// An expired token: refused.
	short := bootstrapToken("n2", "1s")
	time.Sleep(2 * time.Second) // the token's life, the condition under test
	if err := trade(filepath.Join(dir, "late"), short); status.Code(err) != codes.Unauthenticated {
		t.Errorf("trade of an expired token: %v, want Unauthenticated", err)
	}

	// The certificate subscribes as its node, and as no other.
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	node, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: ca.Pool(), Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13})))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = node.Close() }()
	subscribe := func(nodeName string) codes.Code {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		st, err := ipamv1.NewAnnouncerServiceClient(node).Subscribe(cctx)
		if err != nil {
			return status.Code(err)
		}
		if err := st.Send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Hello{Hello: &ipamv1.SubscribeHello{Parent: "tenants/" + accessTenant, Node: nodeName}}}); err != nil {
			_, err = st.Recv()
			return status.Code(err)
		}
		_, err = st.Recv()
		return status.Code(err)
	}
	if got := subscribe(accessNode); got != codes.OK {
		t.Errorf("subscribe as its own node: %v", got)
	}
	if got := subscribe("n2"); got != codes.PermissionDenied {
		t.Errorf("subscribe as another node: %v, want PermissionDenied", got)
	}
	// Without a certificate, nothing else is open.
	if _, err := ipamv1.NewCertificateServiceClient(anon).CreateBootstrapToken(ctx, &ipamv1.CreateBootstrapTokenRequest{
		Parent: "tenants/" + accessTenant, Node: "n3", Ttl: durationpb.New(time.Hour)}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("CreateBootstrapToken with no certificate: %v, want Unauthenticated", err)
	}
	if _, err := ipamv1.NewCertificateServiceClient(node).CreateBootstrapToken(ctx, &ipamv1.CreateBootstrapTokenRequest{
		Parent: "tenants/" + accessTenant, Node: "n3", Ttl: durationpb.New(time.Hour)}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("CreateBootstrapToken as the node: %v, want PermissionDenied", err)
	}
	wantLogged := []string{`"msg":"bootstrap token created"`, `"msg":"node certificate issued"`, `"msg":"bootstrap token refused"`}
	logs := d.waitLogs(func(logs string) bool { return containsAll(logs, wantLogged) })
	for _, want := range wantLogged {
		if !strings.Contains(logs, want) {
			t.Errorf("ipamd did not log %s", want)
		}
	}
	_, metrics := httpGet(t, "http://"+d.ops+"/metrics")
	for result, want := range map[string]float64{"issued": 1, "token": 2} {
		if got := countSample(metrics, "beacon_ipam_bootstrap_trades_total", `result="`+result+`"`); got != want {
			t.Errorf("beacon_ipam_bootstrap_trades_total{result=%q} = %v, want %v:\n%s", result, got, want, grepLines(metrics, "bootstrap"))
		}
	}
}

// TestBootstrapAnnouncerd runs the whole bare-metal path with real
// processes in network namespaces: ipamd with a node issuer on "ctl",
// beaconctl making a bootstrap token there, and announcerd on "node"
// trading it for its certificate and then subscribing with it. A second
// announcerd given the same token (and no certificate) exits refused.
func TestBootstrapAnnouncerd(t *testing.T) {
	lab := netlab.NewForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctlAddr := netip.MustParsePrefix("198.51.100.1/24")
	ctl, err := lab.AddHost(ctx, "ctl", ctlAddr)
	if err != nil {
		t.Fatal(err)
	}
	node, err := lab.AddHost(ctx, "node", netip.MustParsePrefix("198.51.100.2/24"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, err := devcerts.Ensure(filepath.Join(dir, "certs"), accessIDs["admin"])
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(p.CA)
	keyPEM, _ := os.ReadFile(p.CAKey)
	ca, err := devcerts.LoadCA(caPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey, err := ca.Server(ctlAddr.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srvCertFile, srvKeyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	if err := os.WriteFile(srvCertFile, srvCert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(srvKeyFile, srvKey, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := binDir(t)
	server := ctlAddr.Addr().String() + ":7400"
	ipamd, err := ctl.Start("ipamd", []string{filepath.Join(bin, "ipamd"), "--listen", server, "--ops-listen", "127.0.0.1:7401",
		"--data-dir", filepath.Join(dir, "data"), "--log-level", "debug",
		"--tls-cert", srvCertFile, "--tls-key", srvKeyFile, "--tls-client-ca", p.CA,
		"--node-issuer-cert", p.CA, "--node-issuer-key", p.CAKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitLog := func(what string, proc *netlab.Proc, want string) {
		t.Helper()
		exited := false
		err := testwait.Poll(t.Context(), 90*time.Second, func() error {
			if strings.Contains(proc.Tail(400), want) {
				return nil
			}
			if exited, _ = proc.Exited(); exited {
				return nil // no use waiting
			}
			return testwait.ErrNotYet
		})
		if err != nil || exited {
			t.Fatalf("%s: no %q in its log (exited %v, %v):\n%s", what, want, exited, err, proc.Tail(40))
		}
	}
	waitLog("ipamd", ipamd, `"msg":"ipamd serving"`)

	adminCert, adminKey := devcerts.ClientFiles(accessIDs["admin"])
	out, err := ctl.Run(ctx, filepath.Join(bin, "beaconctl"), "--server", server, "--ca", p.CA,
		"--cert", filepath.Join(dir, "certs", adminCert), "--key", filepath.Join(dir, "certs", adminKey),
		"certs", "bootstrap", "--tenant", accessTenant, "--node", accessNode, "--valid", "10m")
	if err != nil {
		t.Fatal(err)
	}
	var token string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "beacon-bootstrap-") {
			token = strings.TrimSpace(l)
		}
	}
	if token == "" {
		t.Fatalf("beaconctl certs bootstrap printed no token:\n%s", out)
	}
	tokenFile := filepath.Join(dir, "node.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	announcerd := func(name, certDir string) *netlab.Proc {
		proc, err := node.Start(name, []string{filepath.Join(bin, "announcerd"), "--ipam", server,
			"--tenant", accessTenant, "--node", accessNode, "--router-id", "198.51.100.2",
			"--ops-listen", "127.0.0.1:0", "--log-level", "debug",
			"--tls-ca", p.CA, "--bootstrap-token-file", tokenFile, "--cert-dir", certDir}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return proc
	}
	first := announcerd("announcerd", filepath.Join(dir, "node-certs"))
	waitLog("announcerd", first, "node certificate obtained with the bootstrap token")
	waitLog("ipamd", ipamd, `"msg":"announcer subscribed","tenant":"`+accessTenant+`","node":"`+accessNode+`"`)
	if _, err := os.Stat(filepath.Join(dir, "node-certs", bootstrap.KeyFile)); err != nil {
		t.Error(err)
	}
	first.Stop(10 * time.Second)

	// The token is spent: another announcerd with no certificate of its own
	// cannot trade it, and exits saying so.
	second := announcerd("announcerd-again", filepath.Join(dir, "other-certs"))
	select {
	case <-second.Done():
	case <-time.After(60 * time.Second):
		t.Fatalf("a second announcerd with a spent token still runs:\n%s", second.Tail(20))
	}
	if log := second.Tail(20); !strings.Contains(log, "Unauthenticated") {
		t.Errorf("second announcerd did not exit refused:\n%s", log)
	}
	// The first one restarts with the certificate it has, without the token.
	before := strings.Count(ipamd.Tail(5000), `"msg":"announcer subscribed"`)
	restarted := announcerd("announcerd-restarted", filepath.Join(dir, "node-certs"))
	exited := false
	err = testwait.Poll(t.Context(), 90*time.Second, func() error {
		if strings.Count(ipamd.Tail(5000), `"msg":"announcer subscribed"`) > before {
			return nil
		}
		if exited, _ = restarted.Exited(); exited {
			return nil // no use waiting
		}
		return testwait.ErrNotYet
	})
	if err != nil || exited {
		t.Fatalf("the restarted announcerd did not subscribe with its certificate (exited %v, %v):\n%s", exited, err, restarted.Tail(20))
	}
	restarted.Stop(10 * time.Second)
}
