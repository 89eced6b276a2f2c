package tokenreview

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Config
		wantErr string // a substring of the error; "" for none
	}{
		{
			name: "YAML, default audience",
			in: `clusters:
- name: prod
  tenant: c1
  server: https://10.0.0.1:6443
  caFile: /etc/beacon/prod-ca.crt
  tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
  serviceAccounts: [beacon-system/beacon-announcer]
`,
			want: Config{Clusters: []Cluster{{
				Name: "prod", Tenant: "c1", Server: "https://10.0.0.1:6443", CAFile: "/etc/beacon/prod-ca.crt",
				TokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token", Audience: DefaultAudience,
				ServiceAccounts: []string{"beacon-system/beacon-announcer"},
			}}},
		},
		{
			name: "JSON, own audience",
			in:   `{"clusters":[{"name":"a","tenant":"t","server":"https://a","caFile":"ca","tokenFile":"tok","audience":"x","serviceAccounts":["ns/sa"]}]}`,
			want: Config{Clusters: []Cluster{{Name: "a", Tenant: "t", Server: "https://a", CAFile: "ca", TokenFile: "tok", Audience: "x", ServiceAccounts: []string{"ns/sa"}}}},
		},
		{name: "no clusters", in: `clusters: []`, wantErr: "no clusters"},
		{name: "unknown field", in: `clusters: [{name: a, tenants: [x]}]`, wantErr: "unknown field"},
		{
			name:    "every missing field named",
			in:      `clusters: [{name: a, server: "http://a", serviceAccounts: [justaname]}]`,
			wantErr: "clusters[0].tenant: required",
		},
		{
			name:    "plain http",
			in:      `clusters: [{name: a, tenant: t, server: "http://a", caFile: c, tokenFile: k, serviceAccounts: [n/s]}]`,
			wantErr: `clusters[0].server: "http://a" is not an https:// URL`,
		},
		{
			name:    "bad ServiceAccount",
			in:      `clusters: [{name: a, tenant: t, server: "https://a", caFile: c, tokenFile: k, serviceAccounts: [n/s/x]}]`,
			wantErr: `"n/s/x" is not NAMESPACE/NAME`,
		},
		{
			name: "the same name twice",
			in: `clusters: [{name: a, tenant: t, server: "https://a", caFile: c, tokenFile: k, serviceAccounts: [n/s]},
                     {name: a, tenant: u, server: "https://b", caFile: c, tokenFile: k, serviceAccounts: [n/s]}]`,
			wantErr: `clusters[1].name: "a" twice`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrConfig) {
					t.Fatalf("error %v, want ErrConfig with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseClaims(t *testing.T) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		token  string
		want   claims
		wantOK bool
	}{
		{enc(`{"alg":"RS256"}`) + "." + enc(`{"exp":1700000000,"aud":["beacon-ipam"]}`) + ".sig", claims{Exp: 1700000000}, true},
		{enc(`{}`) + "." + enc(`{}`) + ".sig", claims{}, true},
		{"not-a-jwt", claims{}, false},
		{"a.b", claims{}, false},
		{"a.!!!.c", claims{}, false},
		{"a." + enc("not json") + ".c", claims{}, false},
	}
	for _, tt := range tests {
		got, ok := parseClaims(tt.token)
		if ok != tt.wantOK || got != tt.want {
			t.Errorf("parseClaims(%q) = %v, %v; want %v, %v", tt.token, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestLoadConfigExpandsEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clusters.yaml")
	const file = `clusters:
- name: local
  tenant: ${BEACON_KUBE_TENANT}
  server: https://kubernetes.default.svc
  caFile: /ca.crt
  tokenFile: /token
  serviceAccounts: [beacon-system/beacon-announcer]
`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"BEACON_KUBE_TENANT": "c1"}
	c, err := LoadConfig(path, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Clusters[0].Tenant; got != "c1" {
		t.Errorf("tenant = %q, want c1 from the environment", got)
	}
	_, err = LoadConfig(path, func(string) string { return "" })
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "BEACON_KUBE_TENANT") {
		t.Errorf("without the variable: %v, want ErrConfig naming BEACON_KUBE_TENANT", err)
	}
}
