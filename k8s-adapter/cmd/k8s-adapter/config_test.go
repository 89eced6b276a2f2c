package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseConfig(t *testing.T) {
	env := map[string]string{"BEACON_K8S_TENANT": "c1", "POD_NAMESPACE": "beacon"}
	c, err := parseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		IPAM: []string{"127.0.0.1:7400"}, Tenant: "c1", Class: "beacon.io/lb", AlsoUnclassed: true,
		Workers: 16, ResyncPeriod: 10 * time.Minute, MetalLBNamespace: "metallb-system", SyncNodes: true,
		LeaderElect: true, LeaseNamespace: "beacon", LeaseName: "beacon-k8s-adapter",
		LeaseDuration: 8 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: time.Second,
		KubeQPS: 300, KubeBurst: 600, OpsListen: "127.0.0.1:7403", LogLevel: "info",
		WebhookCert: "/etc/beacon/webhook/tls.crt", WebhookKey: "/etc/beacon/webhook/tls.key",
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Fatalf("defaults (-want +got):\n%s", diff)
	}

	env["BEACON_K8S_RELEASE_HOLD"] = "0s"
	c, err = parseConfig([]string{"--ipam", "a:1, b:2", "--also-unclassed=false", "--metallb-namespace", "", "--sync-nodes=false"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.ReleaseHold == nil || *c.ReleaseHold != 0 || c.AlsoUnclassed || c.MetalLBNamespace != "" || c.SyncNodes || !cmp.Equal(c.IPAM, []string{"a:1", "b:2"}) {
		t.Errorf("flags and env not taken: %+v", c)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "--tenant is required"},
		{[]string{"--tenant", "Cluster_1"}, "--tenant \"Cluster_1\""},
		{[]string{"--tenant", "-"}, "--tenant \"-\""},
		{[]string{"--tenant", "c1", "--ipam", " "}, "--ipam"},
		{[]string{"--tenant", "c1", "--workers", "0"}, "--workers"},
		{[]string{"--tenant", "c1", "--also-unclassed", "maybe"}, "--also-unclassed"},
		{[]string{"--tenant", "c1", "--sync-nodes", "sometimes"}, "--sync-nodes"},
		{[]string{"--tenant", "c1", "--release-hold", "-1s"}, "--release-hold"},
		{[]string{"--tenant", "c1", "--renew-deadline", "10s"}, "--retry-period < --renew-deadline < --lease-duration"},
		{[]string{"--tenant", "c1", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key"},
		{[]string{"--tenant", "c1", "extra"}, "unexpected arguments"},
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
