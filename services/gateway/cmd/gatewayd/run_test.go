package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beaconlb/beacon/pkg/ipamtest"
	"github.com/beaconlb/beacon/pkg/testwait"
)

func TestMain(m *testing.M) { ipamtest.Main(m) }

func TestBootstrapSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "admin-token")
	s, created, err := bootstrapSecret(path)
	if err != nil || !created || !strings.HasPrefix(s, "bct_") || len(s) < 40 {
		t.Fatalf("first call = %q, %v, %v", s, created, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}
	again, created, err := bootstrapSecret(path)
	if err != nil || created || again != s {
		t.Errorf("second call = %q, %v, %v; want the same secret, read back", again, created, err)
	}
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := bootstrapSecret(short); err == nil {
		t.Error("a 3-character bootstrap secret was accepted")
	}
	if s, _, err := bootstrapSecret(""); s != "" || err != nil {
		t.Errorf("no file = %q, %v", s, err)
	}
}

// syncBuffer is a log sink safe for the logger and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRun runs gatewayd's run in front of a real ipamd with development
// certificates and a bootstrap token file it makes itself, calls it over
// HTTPS, checks readiness, and stops it as SIGTERM would.
func TestRun(t *testing.T) {
	ipam := ipamtest.Start(t, ipamtest.Options{}).Replicas[0]
	dir := t.TempDir()
	cfg, err := parseConfig([]string{
		"--listen", "127.0.0.1:0", "--ops-listen", "127.0.0.1:0", "--ipam", ipam.Addr,
		"--dev-certs", filepath.Join(dir, "certs"), "--bootstrap-token-file", filepath.Join(dir, "admin-token"),
		"--shutdown-grace", "2s",
	}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, logger) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Logf("run: %v", err)
		}
	}()

	var listen, ops string
	if err := testwait.Poll(t.Context(), time.Minute, func() error {
		for line := range strings.Lines(logs.String()) {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "gatewayd serving" {
				listen, _ = rec["listen"].(string)
				ops, _ = rec["ops"].(string)
				return nil
			}
		}
		return testwait.ErrNotYet
	}); err != nil {
		t.Fatalf("gatewayd not serving (%v):\n%s", err, logs.String())
	}
	if strings.Contains(logs.String(), "bct_") {
		t.Error("the bootstrap secret appears in the log")
	}

	caPEM, err := os.ReadFile(filepath.Join(dir, "certs", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	token, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	get := func(url, bearer string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	testwait.For(t, time.Minute, "/readyz to answer 200", func() error {
		if code, body := get("http://"+ops+"/readyz", ""); code != http.StatusOK {
			return fmt.Errorf("/readyz = %d %s", code, body)
		}
		return nil
	})
	if code, body := get("https://"+listen+"/v1/pools", strings.TrimSpace(string(token))); code != http.StatusOK {
		t.Errorf("GET /v1/pools with the bootstrap token = %d %s", code, body)
	}
	if code, _ := get("https://"+listen+"/v1/pools", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/pools without credentials = %d, want 401", code)
	}
	if code, body := get("http://"+ops+"/metrics", ""); code != http.StatusOK || !strings.Contains(body, "rpc_server_call_duration") {
		t.Errorf("/metrics = %d, without gRPC server metrics", code)
	}

	start := time.Now()
	cancel()
	select {
	case err := <-done:
		done <- err // for the deferred receive
		if err != nil {
			t.Errorf("run after cancel: %v\n%s", err, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	if !strings.Contains(logs.String(), `"msg":"gatewayd stopped","clean":true`) {
		t.Errorf("no clean stop logged:\n%s", logs.String())
	}
	t.Logf("stopped in %v", time.Since(start).Round(time.Millisecond))
}
