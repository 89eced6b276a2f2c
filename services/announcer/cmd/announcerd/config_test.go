package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLocalAddressesDevice(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{name: "off by default"},
		{name: "flag", args: []string{"--local-addresses-device", "beacon0"}, want: "beacon0"},
		{name: "environment", env: map[string]string{"BEACON_ANNOUNCER_LOCAL_ADDRESSES_DEVICE": "beacon0"}, want: "beacon0"},
		{name: "too long", args: []string{"--local-addresses-device", "beacon-local-addrs"}, wantErr: true},
		{name: "slash", args: []string{"--local-addresses-device", "a/b"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--tenant", "t1"}, tt.args...)
			c, err := parseConfig(args, func(k string) string { return tt.env[k] }, "node1")
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseConfig error = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if diff := cmp.Diff(tt.want, c.LocalDevice); diff != "" {
				t.Errorf("LocalDevice (-want +got):\n%s", diff)
			}
		})
	}
}

// --version is honoured alone, even when flags the daemon requires to run
// are missing; with other arguments it still prints only the version.
func TestParseConfigVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}, {"--version", "--log-level", "debug"}} {
		c, err := parseConfig(args, func(string) string { return "" }, "node1")
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if !c.Version {
			t.Errorf("%q: Version = false", args)
		}
	}
}

func TestTokenFile(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr bool
	}{
		{name: "off by default"},
		{name: "with TLS", args: []string{"--token-file", "/var/run/secrets/beacon/token", "--tls-ca", "ca.pem"}, want: "/var/run/secrets/beacon/token"},
		{name: "without TLS", args: []string{"--token-file", "tok"}, wantErr: true},
		{name: "with --token too", args: []string{"--token-file", "tok", "--token", "x", "--tls-ca", "ca.pem"}, wantErr: true},
		{name: "bootstrap token", args: []string{"--bootstrap-token-file", "bt", "--cert-dir", "d", "--tls-ca", "ca.pem"}},
		{name: "bootstrap token without --cert-dir", args: []string{"--bootstrap-token-file", "bt", "--tls-ca", "ca.pem"}, wantErr: true},
		{name: "bootstrap token without TLS", args: []string{"--bootstrap-token-file", "bt", "--cert-dir", "d"}, wantErr: true},
		{name: "bootstrap token and a certificate", args: []string{"--bootstrap-token-file", "bt", "--cert-dir", "d", "--tls-ca", "ca.pem", "--tls-cert", "c", "--tls-key", "k"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(append([]string{"--tenant", "t1"}, tt.args...), func(string) string { return "" }, "node1")
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseConfig error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, c.TokenFile); !tt.wantErr && diff != "" {
				t.Errorf("TokenFile (-want +got):\n%s", diff)
			}
		})
	}
}

// The token file is read on every call, so a token the kubelet rotated is
// the one the next session sends.
func TestTokenFileReadEachTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	tf := tokenFile{path: path}
	if _, err := tf.GetRequestMetadata(t.Context()); err == nil {
		t.Error("a missing token file gave no error")
	}
	for _, tok := range []string{"first", "second"} {
		if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		md, err := tf.GetRequestMetadata(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]string{"authorization": "Bearer " + tok}, md); diff != "" {
			t.Errorf("metadata (-want +got):\n%s", diff)
		}
	}
}
