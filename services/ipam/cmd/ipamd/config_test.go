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
	c, err := parseConfig(nil, getenv)
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		Listen: "127.0.0.1:7400", OpsListen: "127.0.0.1:7401", DataDir: "beacon-data", LogLevel: "info",
		ReleaseHold: 10 * time.Minute, ShutdownGrace: 10 * time.Second, EtcdCompaction: time.Hour, EtcdTimeout: 5 * time.Second, CommitWorkers: 1,
		TrustDomain: "beacon", StreamsPerCaller: 16, NodeCertValidity: 90 * 24 * time.Hour,
		EtcdQuotaBytes: 8 << 30, EtcdDefragFree: 0.5, AuditRetention: 30 * 24 * time.Hour,
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Fatalf("defaults (-want +got):\n%s", diff)
	}

	env["BEACON_IPAM_ETCD_ENDPOINTS"] = "http://127.0.0.1:2379, http://127.0.0.1:2380"
	env["BEACON_IPAM_RELEASE_HOLD"] = "0s"
	c, err = parseConfig([]string{"--listen", "127.0.0.1:0"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"http://127.0.0.1:2379", "http://127.0.0.1:2380"}, c.EtcdEndpoints); diff != "" {
		t.Errorf("endpoints from env: %s", diff)
	}
	if c.ReleaseHold != 0 || c.Listen != "127.0.0.1:0" {
		t.Errorf("env/flag values not taken: %+v", c)
	}

	env["BEACON_IPAM_ETCD_PASSWORD"] = "s3cret"
	c, err = parseConfig([]string{"--etcd-ca", "ca.pem", "--etcd-cert", "c.pem", "--etcd-key", "k.pem", "--etcd-username", "beacon"}, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if c.EtcdCA != "ca.pem" || c.EtcdCert != "c.pem" || c.EtcdKey != "k.pem" || c.EtcdUsername != "beacon" || c.EtcdPassword != "s3cret" {
		t.Errorf("etcd security settings not taken: %+v", c)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--release-hold", "soon"}, "--release-hold"},
		{[]string{"--release-hold", "-1s"}, "--release-hold"},
		{[]string{"--commit-workers", "0"}, "--commit-workers"},
		{[]string{"--etcd-timeout", "0s"}, "--etcd-timeout"},
		{[]string{"--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-client-ca", "ca.pem"}, "--tls-client-ca needs"},
		{[]string{"--tls-cert", "c", "--tls-key", "k", "--kube-announcers", "k.yaml"}, "--kube-announcers needs --tls-client-ca"},
		{[]string{"--tls-cert", "c", "--tls-key", "k", "--node-issuer-cert", "ca.pem", "--node-issuer-key", "ca-key.pem"}, "--node-issuer-cert needs --tls-client-ca"},
		{[]string{"--node-issuer-cert", "ca.pem"}, "--node-issuer-cert and --node-issuer-key go together"},
		{[]string{"--node-cert-validity", "10m"}, "--node-cert-validity: at least 1h"},
		{[]string{"--otlp-insecure", "maybe"}, "--otlp-insecure"},
		{[]string{"--etcd-endpoints", "https://192.0.2.1:2379", "--etcd-cert", "c.pem"}, "--etcd-cert and --etcd-key go together"},
		{[]string{"--etcd-endpoints", "https://192.0.2.1:2379", "--etcd-username", "beacon"}, "--etcd-username and --etcd-password go together"},
		{[]string{"--etcd-ca", "ca.pem"}, "give --etcd-endpoints"},
		{[]string{"--etcd-quota-bytes", "1000"}, "--etcd-quota-bytes"},
		{[]string{"--etcd-quota-bytes", "lots"}, "--etcd-quota-bytes"},
		{[]string{"--etcd-defrag-free-fraction", "1"}, "--etcd-defrag-free-fraction"},
		{[]string{"--etcd-defrag-free-fraction", "-0.1"}, "--etcd-defrag-free-fraction"},
		{[]string{"--audit-retention", "5m"}, "--audit-retention: at least 1h"},
		{[]string{"--memory-limit", "1Mi"}, "--memory-limit"},
		{[]string{"--memory-limit", "2GB"}, "--memory-limit"},
		{[]string{"--memory-limit", "-3Gi"}, "--memory-limit"},
		{[]string{"--memory-limit", "99999999999Gi"}, "--memory-limit"},
		{[]string{"extra"}, "unexpected arguments"},
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

// --memory-limit takes bytes or Kubernetes' binary suffixes, with or
// without a trailing B.
func TestParseConfigMemoryLimit(t *testing.T) {
	for _, tt := range []struct {
		arg  string
		want int64
	}{
		{"", 0},
		{"1800Mi", 1800 << 20},
		{"1800MiB", 1800 << 20},
		{"2Gi", 2 << 30},
		{"131072Ki", 128 << 20},
		{"134217728", 128 << 20},
	} {
		c, err := parseConfig([]string{"--memory-limit", tt.arg}, func(string) string { return "" })
		if err != nil {
			t.Fatalf("%q: %v", tt.arg, err)
		}
		if c.MemoryLimit != tt.want {
			t.Errorf("%q: MemoryLimit = %d, want %d", tt.arg, c.MemoryLimit, tt.want)
		}
	}
	c, err := parseConfig(nil, func(k string) string { return map[string]string{"BEACON_IPAM_MEMORY_LIMIT": "1Gi"}[k] })
	if err != nil || c.MemoryLimit != 1<<30 {
		t.Errorf("from the environment: %d, %v; want %d", c.MemoryLimit, err, 1<<30)
	}
}
