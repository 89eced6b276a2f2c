package cli

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// identity is what a credential's certificate says about its holder.
type identity struct {
	URIs  []string
	DNS   []string
	Usage []x509.ExtKeyUsage
}

// verifyCredential checks that cert and key belong together and chain to
// caPEM, and returns what the certificate names.
func verifyCredential(t *testing.T, name string, caPEM, certPEM, keyPEM []byte) identity {
	t.Helper()
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("%s: key does not match its certificate: %v", name, err)
	}
	b, _ := pem.Decode(certPEM)
	if b == nil {
		t.Fatalf("%s: tls.crt is not PEM", name)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s: ca.crt holds no certificate", name)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("%s: does not chain to ca.crt: %v", name, err)
	}
	id := identity{DNS: c.DNSNames, Usage: c.ExtKeyUsage}
	for _, u := range c.URIs {
		id.URIs = append(id.URIs, u.String())
	}
	return id
}

var (
	server = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	client = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	peer   = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
)

func TestCertsDeployKubernetes(t *testing.T) {
	dir := t.TempDir()
	run := func() map[string]map[string][]byte {
		var out bytes.Buffer
		cmd := newCertsDeployCommand()
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"--dir", filepath.Join(dir, "ca"), "--tenant", "c1", "--cluster", "prod", "--node", "n1", "--node", "n2", "--namespace", "lb"})
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		var list struct {
			Kind  string
			Items []json.RawMessage
		}
		if err := json.Unmarshal(out.Bytes(), &list); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out.String())
		}
		if list.Kind != "List" {
			t.Fatalf("kind %q, want List", list.Kind)
		}
		got := map[string]map[string][]byte{}
		var cas []configMap
		for _, raw := range list.Items {
			var s secret
			if err := json.Unmarshal(raw, &s); err != nil || s.Kind == "ConfigMap" {
				var cm configMap
				if err := json.Unmarshal(raw, &cm); err != nil {
					t.Fatal(err)
				}
				cas = append(cas, cm)
				continue
			}
			if s.Metadata.Namespace != "lb" || s.Type != "kubernetes.io/tls" || s.Kind != "Secret" {
				t.Errorf("%s: namespace %q, type %q, kind %q", s.Metadata.Name, s.Metadata.Namespace, s.Type, s.Kind)
			}
			got[s.Metadata.Name] = s.Data
		}
		if len(cas) != 1 || cas[0].Metadata.Name != "beacon-ipam-ca" || cas[0].Metadata.Namespace != "lb" ||
			cas[0].Data["ca.crt"] != string(got["beacon-ipam-tls"]["ca.crt"]) || len(cas[0].Data) != 1 {
			t.Errorf("ConfigMaps = %+v, want beacon-ipam-ca in lb with the CA (ca.crt) alone", cas)
		}
		return got
	}
	first := run()
	ipamHosts := []string{"beacon-ipamd", "beacon-ipamd.lb", "beacon-ipamd.lb.svc", "beacon-ipamd.lb.svc.cluster.local"}
	want := map[string]identity{
		"beacon-ipam-tls":                {DNS: ipamHosts, Usage: server},
		"beacon-gateway-tls":             {DNS: []string{"beacon-gateway", "beacon-gateway.lb", "beacon-gateway.lb.svc", "beacon-gateway.lb.svc.cluster.local"}, Usage: server},
		"beacon-gateway-ipam-client":     {URIs: []string{"spiffe://beacon/gateway"}, Usage: client},
		"beacon-k8s-adapter-ipam-client": {URIs: []string{"spiffe://beacon/tenant/c1/adapter/prod"}, Usage: client},
		"beacon-announcer-n1":            {URIs: []string{"spiffe://beacon/tenant/c1/announcer/n1"}, Usage: client},
		"beacon-announcer-n2":            {URIs: []string{"spiffe://beacon/tenant/c1/announcer/n2"}, Usage: client},
		"beacon-etcd-client":             {URIs: []string{"spiffe://beacon/etcd-client"}, Usage: client},
		"beacon-etcd-peer":               {DNS: []string{"beacon-etcd", "beacon-etcd.lb", "beacon-etcd.lb.svc", "beacon-etcd.lb.svc.cluster.local", "*.beacon-etcd.lb.svc", "*.beacon-etcd.lb.svc.cluster.local", "localhost"}, Usage: peer},
	}
	got := map[string]identity{}
	var keys [][]byte
	for name, data := range first {
		got[name] = verifyCredential(t, name, data["ca.crt"], data["tls.crt"], data["tls.key"])
		if slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, data["tls.key"]) }) {
			t.Errorf("%s shares a key with another role", name)
		}
		keys = append(keys, data["tls.key"])
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("credentials (-want +got):\n%s", d)
	}
	// Again: the same CA (certificates already out stay valid), new
	// certificates (rotation).
	second := run()
	if !bytes.Equal(first["beacon-ipam-tls"]["ca.crt"], second["beacon-ipam-tls"]["ca.crt"]) {
		t.Error("a second run made a new CA")
	}
	if bytes.Equal(first["beacon-ipam-tls"]["tls.key"], second["beacon-ipam-tls"]["tls.key"]) {
		t.Error("a second run did not make new certificates")
	}
}

func TestCertsDeployFiles(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "certs")
	args := []string{"--dir", filepath.Join(dir, "ca"), "--format", "files", "--out", out, "--tenant", "lab",
		"--ipam-host", "ipamd-1", "--ipam-host", "198.51.100.11", "--node", "node-1", "--admin", "lab"}
	run := func() {
		cmd := newCertsDeployCommand()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
	}
	run()
	read := func(p ...string) []byte {
		b, err := os.ReadFile(filepath.Join(append([]string{out}, p...)...))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	got := map[string]identity{}
	for _, n := range []string{"ipam-tls", "announcer-node-1", "admin-lab", "k8s-adapter-ipam-client"} {
		got[n] = verifyCredential(t, n, read(n, "ca.crt"), read(n, "tls.crt"), read(n, "tls.key"))
	}
	want := map[string]identity{
		"ipam-tls":                {DNS: []string{"ipamd-1"}, Usage: server},
		"announcer-node-1":        {URIs: []string{"spiffe://beacon/tenant/lab/announcer/node-1"}, Usage: client},
		"admin-lab":               {URIs: []string{"spiffe://beacon/admin/lab"}, Usage: client},
		"k8s-adapter-ipam-client": {URIs: []string{"spiffe://beacon/tenant/lab/adapter/default"}, Usage: client},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("credentials (-want +got):\n%s", d)
	}
	if fi, err := os.Stat(filepath.Join(out, "ipam-tls", "tls.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tls.key: %v, mode %v; want 0600", err, fi.Mode())
	}
	// Again (the compose lab's every start): what is there is kept.
	key := read("ipam-tls", "tls.key")
	run()
	if !bytes.Equal(key, read("ipam-tls", "tls.key")) {
		t.Error("a second run replaced a key")
	}
}

func TestCertsDeployRefuses(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want error
		text string
	}{
		{name: "unknown format", args: []string{"--format", "yaml"}, want: errDeployFormat},
		{name: "files without out", args: []string{"--format", "files"}, want: errDeployOut},
		{name: "node without tenant", args: []string{"--node", "n1"}, text: "--node: needs --tenant"},
		{name: "bad tenant", args: []string{"--tenant", "Not_A_Tenant"}, text: "--tenant, --cluster: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newCertsDeployCommand()
			cmd.SetOut(&bytes.Buffer{})
			cmd.SetErr(&bytes.Buffer{})
			cmd.SetArgs(append([]string{"--dir", filepath.Join(dir, "ca")}, tc.args...))
			err := cmd.Execute()
			switch {
			case err == nil:
				t.Fatal("no error")
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("error %v, want %v", err, tc.want)
			case tc.text != "" && !bytes.HasPrefix([]byte(err.Error()), []byte(tc.text)):
				t.Errorf("error %q, want it to start with %q", err, tc.text)
			}
		})
	}
}
