package cli

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
)

// runIn runs beaconctl with env and the make-run files looked for in dir.
func runIn(t *testing.T, dir string, env map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr syncBuffer
	cmd := NewRootCommand(Env{
		Stdout: &stdout,
		Stderr: &stderr,
		Getenv: func(k string) string { return env[k] },
		Dir:    dir,
	})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConnectionSettings checks where the server, CA, client certificate
// and token come from: flags, then the environment, then the config file,
// then the files of `make run`.
func TestConnectionSettings(t *testing.T) {
	pki := newTestPKI(t)
	// A TLS front (as the gateway is) and a plaintext one before one real
	// IPAM, each keeping the metadata of the calls.
	ipam := newIPAM(t)
	f, gw := ipam.record(t, grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{pki.server},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    pki.pool,
		MinVersion:   tls.VersionTLS12,
	})))
	plain, plainAddr := ipam.record(t)
	dead := unusedAddr(t)
	caPEM, err := os.ReadFile(pki.caFile)
	if err != nil {
		t.Fatal(err)
	}

	// A checkout after `make run`.
	repo := t.TempDir()
	writeFile(t, filepath.Join(repo, ".data", "certs", "ca.pem"), string(caPEM))
	writeFile(t, filepath.Join(repo, ".data", "admin-token"), "bct_admin\n")

	// Config files, with a relative CA path and a token file.
	cfgDir := t.TempDir()
	writeFile(t, filepath.Join(cfgDir, "ca.pem"), string(caPEM))
	writeFile(t, filepath.Join(cfgDir, "tok"), " bct_fromfile \n")
	yamlCfg := writeFile(t, filepath.Join(cfgDir, "config.yaml"), "# beacon\nserver: "+gw+"\nca: ca.pem\ntoken_file: tok\n")
	jsonCfg := writeFile(t, filepath.Join(cfgDir, "config.json"), `{"server": "`+gw+`", "ca": "`+filepath.Join(cfgDir, "ca.pem")+`", "token": "bct_json"}`)
	badKey := writeFile(t, filepath.Join(cfgDir, "bad.yaml"), "server: x\ntokn: y\n")
	both := writeFile(t, filepath.Join(cfgDir, "both.yaml"), "token: a\ntoken_file: tok\n")
	xdg := t.TempDir()
	writeFile(t, filepath.Join(xdg, "beacon", "config.yaml"), "server: "+gw+"\nca: "+pki.caFile+"\ntoken: bct_xdg\n")
	home := t.TempDir()
	writeFile(t, filepath.Join(home, ".config", "beacon", "config.yaml"), "server: "+gw+"\nca: "+pki.caFile+"\ntoken: bct_home\n")

	tests := []struct {
		name     string
		dir      string
		env      map[string]string
		args     []string
		fake     *recorder
		wantAuth []string
		wantErr  string
	}{
		{name: "make run: dev CA and admin token", dir: repo, args: []string{"--server", gw}, wantAuth: []string{"Bearer bct_admin"}},
		{name: "make run: a token wins over the admin token", dir: repo, env: map[string]string{EnvToken: "bct_mine"}, args: []string{"--server", gw}, wantAuth: []string{"Bearer bct_mine"}},
		{name: "make run: a client certificate replaces the admin token", dir: repo, args: []string{"--server", gw, "--cert", pki.certFile, "--key", pki.keyFile}},
		{name: "make run: --plaintext uses neither", dir: repo, args: []string{"--plaintext", "--server", plainAddr}, fake: plain},
		{name: "no make run: no CA, no token", args: []string{"--server", gw}, wantErr: "Unavailable"},
		{name: "yaml config file", args: []string{"--config", yamlCfg}, wantAuth: []string{"Bearer bct_fromfile"}},
		{name: "json config file from env", env: map[string]string{EnvConfig: jsonCfg}, wantAuth: []string{"Bearer bct_json"}},
		{name: "env wins over config", env: map[string]string{EnvConfig: jsonCfg, EnvToken: "bct_env"}, wantAuth: []string{"Bearer bct_env"}},
		{name: "flag wins over env", env: map[string]string{EnvConfig: jsonCfg, EnvToken: "bct_env"}, args: []string{"--token", "bct_flag"}, wantAuth: []string{"Bearer bct_flag"}},
		{name: "env server wins over config", env: map[string]string{EnvConfig: jsonCfg, EnvServer: dead}, wantErr: dead},
		{name: "config wins over make run", dir: repo, args: []string{"--config", jsonCfg}, wantAuth: []string{"Bearer bct_json"}},
		{name: "XDG_CONFIG_HOME", env: map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": home}, wantAuth: []string{"Bearer bct_xdg"}},
		{name: "HOME", env: map[string]string{"HOME": home}, wantAuth: []string{"Bearer bct_home"}},
		{name: "missing explicit config", args: []string{"--config", filepath.Join(cfgDir, "nope.yaml")}, wantErr: "reading config file"},
		{name: "unknown key", args: []string{"--config", badKey}, wantErr: "tokn"},
		{name: "token and token_file", args: []string{"--config", both}, wantErr: "not both"},
		{name: "plaintext and ca", args: []string{"--plaintext", "--ca", pki.caFile}, wantErr: "--ca needs TLS"},
		{name: "plaintext and tls", args: []string{"--plaintext", "--tls"}, wantErr: "contradict"},
		{name: "cert from env without key", env: map[string]string{EnvCert: pki.certFile}, args: []string{"--server", gw}, wantErr: "--cert and --key must be given together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := f
			if tt.fake != nil {
				fake = tt.fake
			}
			before := len(fake.recordedMetadata())
			res := runIn(t, tt.dir, tt.env, append(tt.args, "pool", "list")...)
			if tt.wantErr != "" {
				if got := output.FormatError(res.err); res.err == nil || !strings.Contains(got, tt.wantErr) {
					t.Fatalf("error %q, want one containing %q", got, tt.wantErr)
				}
				return
			}
			if res.err != nil {
				t.Fatal(output.FormatError(res.err))
			}
			if res.stdout != "NAME   RANGES   AUTO   IPV4(USED/SIZE)   IPV6(USED/SIZE)   PRIORITY\n" || res.stderr != "" {
				t.Errorf("stdout %q, stderr %q: want the empty table and nothing else", res.stdout, res.stderr)
			}
			mds := fake.recordedMetadata()[before:]
			if len(mds) != 1 {
				t.Fatalf("%d calls reached the server, want 1", len(mds))
			}
			if diff := cmp.Diff(tt.wantAuth, mds[0].Get("authorization")); diff != "" {
				t.Errorf("authorization metadata (-want +got):\n%s", diff)
			}
		})
	}
}
