package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseConfig(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	c, err := parseConfig([]string{"--dev-certs", "certs"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		Listen: "127.0.0.1:8443", OpsListen: "127.0.0.1:8444", IPAM: []string{"127.0.0.1:7400"}, DevCerts: "certs",
		TokenCacheTTL: 10 * time.Second, TokenNegativeTTL: 2 * time.Second, RateLimit: 100, RateBurst: 200, RateLimitHold: 250 * time.Millisecond,
		AuthFailureRate: 5, AuthFailureBurst: 20,
		MaxUnaryTimeout: 30 * time.Second, MaxRESTBody: 1 << 20, MaxStreamsPerConn: 100, LogLevel: "info",
		ShutdownGrace: 10 * time.Second,
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Fatalf("defaults (-want +got):\n%s", diff)
	}

	env["BEACON_GATEWAY_IPAM"] = "192.0.2.1:7400, 192.0.2.2:7400"
	env["BEACON_GATEWAY_TLS_CERT"] = "c.pem"
	env["BEACON_GATEWAY_TLS_KEY"] = "k.pem"
	env["BEACON_GATEWAY_RATE_LIMIT"] = "0"
	c, err = parseConfig([]string{"--listen", ":9443"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"192.0.2.1:7400", "192.0.2.2:7400"}, c.IPAM); diff != "" {
		t.Errorf("IPAM from env: %s", diff)
	}
	if c.Listen != ":9443" || c.TLSCert != "c.pem" || c.RateLimit != 0 {
		t.Errorf("env/flag values not taken: %+v", c)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "serves TLS only"},
		{[]string{"--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--dev-certs", "d", "--tls-cert", "c", "--tls-key", "k"}, "exclude each other"},
		{[]string{"--dev-certs", "d", "--ipam", " , "}, "--ipam"},
		{[]string{"--dev-certs", "d", "--token-cache-ttl", "0s"}, "--token-cache-ttl"},
		{[]string{"--dev-certs", "d", "--rate-limit", "-1"}, "--rate-limit"},
		{[]string{"--dev-certs", "d", "--rate-burst", "0"}, "--rate-burst"},
		{[]string{"--dev-certs", "d", "--rate-limit-hold", "-1s"}, "--rate-limit-hold"},
		{[]string{"--dev-certs", "d", "--max-rest-body", "big"}, "--max-rest-body"},
		{[]string{"--dev-certs", "d", "--max-streams-per-conn", "0"}, "--max-streams-per-conn"},
		{[]string{"--dev-certs", "d", "--ipam-tls-cert", "c", "--ipam-tls-key", "k"}, "--ipam-tls-cert needs --ipam-tls-ca"},
		{[]string{"--dev-certs", "d", "--otlp-insecure", "maybe"}, "--otlp-insecure"},
		{[]string{"--dev-certs", "d", "extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseConfig(tt.args, func(string) string { return "" })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// --version is honoured alone, even when flags the daemon requires to run
// are missing; with other arguments it still prints only the version.
func TestParseConfigVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}, {"--version", "--log-level", "debug"}} {
		c, err := parseConfig(args, func(string) string { return "" })
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if !c.Version {
			t.Errorf("%q: Version = false", args)
		}
	}
}
