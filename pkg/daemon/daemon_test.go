package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type testConfig struct {
	version bool
	level   string
}

func TestMainExitCodes(t *testing.T) {
	tests := []struct {
		name     string
		cfg      testConfig
		parseErr error
		runErr   error
		want     int
		stdout   string // a prefix
		stderr   string // a substring
		ran      bool
	}{
		{name: "runs", cfg: testConfig{level: "info"}, want: 0, ran: true},
		{name: "version", cfg: testConfig{version: true}, want: 0, stdout: "demo v1.2.3 (go"},
		{name: "bad config", parseErr: errors.New("--listen: bad"), want: 2, stderr: "demo: --listen: bad"},
		{name: "bad log level", cfg: testConfig{level: "loud"}, want: 2, stderr: "demo: "},
		{name: "run fails", cfg: testConfig{level: "info"}, runErr: errors.New("no etcd"), want: 1, stderr: "demo stopped", ran: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			var ran, prepared, ctxLive bool
			d := Daemon[testConfig]{
				Name: "demo", Version: "v1.2.3",
				Parse:   func() (testConfig, error) { return tc.cfg, tc.parseErr },
				Basics:  func(c testConfig) (bool, string) { return c.version, c.level },
				Prepare: func(testConfig, *slog.Logger) { prepared = true },
				Run: func(ctx context.Context, _ testConfig, _ *slog.Logger) error {
					ran, ctxLive = true, ctx.Err() == nil
					return tc.runErr
				},
			}
			got := d.main(&stdout, &stderr, func() (context.Context, context.CancelFunc) {
				return context.WithCancel(context.Background())
			})
			if got != tc.want {
				t.Errorf("exit code %d, want %d (stderr %q)", got, tc.want, stderr.String())
			}
			if diff := cmp.Diff([]bool{tc.ran, tc.ran, tc.ran}, []bool{ran, prepared, ctxLive}); diff != "" {
				t.Errorf("ran, prepared, ran in a live context (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(stdout.String(), tc.stdout) {
				t.Errorf("stdout %q, want it to start with %q", stdout.String(), tc.stdout)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q, want it to hold %q", stderr.String(), tc.stderr)
			}
		})
	}
}

func TestFlagsDefaultFromTheEnvironment(t *testing.T) {
	env := map[string]string{"BEACON_DEMO_OPS_LISTEN": "127.0.0.1:9", "BEACON_DEMO_VERSION": "true"}
	tests := []struct {
		name string
		args []string
		want []string // listen, ops-listen
		ver  bool
	}{
		{name: "defaults and environment", want: []string{"127.0.0.1:1", "127.0.0.1:9"}},
		{name: "flags win", args: []string{"--listen", "127.0.0.1:2", "--ops-listen", "127.0.0.1:3"}, want: []string{"127.0.0.1:2", "127.0.0.1:3"}},
		{name: "version is a flag only", args: []string{"--version"}, want: []string{"127.0.0.1:1", "127.0.0.1:9"}, ver: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var version bool
			var listen, ops string
			fs := NewFlags("demo", "BEACON_DEMO", func(k string) string { return env[k] }, &version)
			fs.String(&listen, "listen", "127.0.0.1:1", "")
			fs.String(&ops, "ops-listen", "127.0.0.1:8", "")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, []string{listen, ops}); diff != "" || version != tc.ver {
				t.Errorf("(-want +got):\n%s; version %v, want %v", diff, version, tc.ver)
			}
		})
	}
}

func TestList(t *testing.T) {
	tests := map[string][]string{
		"":                nil,
		" , ":             nil,
		"a":               {"a"},
		" a , b,, c ":     {"a", "b", "c"},
		"192.0.2.1:7400,": {"192.0.2.1:7400"},
	}
	for in, want := range tests {
		if diff := cmp.Diff(want, List(in)); diff != "" {
			t.Errorf("List(%q) (-want +got):\n%s", in, diff)
		}
	}
}
