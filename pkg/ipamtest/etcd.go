package ipamtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/beaconlb/beacon/pkg/loopback"
	"github.com/beaconlb/beacon/pkg/testwait"
)

// ErrNoEtcd means the etcd of the test binaries is not built.
var ErrNoEtcd = errors.New("ipamtest: no etcd from the test binaries; run `make testbins` (or set BEACON_TESTBINS)")

// TestbinsDir returns the folder of the test binaries tests/testbins
// builds (etcd, kube-apiserver, kubectl): $BEACON_TESTBINS, else
// $BEACON_CACHE/testbins, else .cache/testbins of the repository (the
// first folder above the working directory holding go.work).
func TestbinsDir() (string, error) {
	if d := os.Getenv("BEACON_TESTBINS"); d != "" {
		return d, nil
	}
	if d := os.Getenv("BEACON_CACHE"); d != "" {
		return filepath.Join(d, "testbins"), nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return filepath.Join(d, ".cache", "testbins"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work above %s", wd)
		}
	}
}

// EtcdBinary returns the etcd of the test binaries (TestbinsDir). It
// wraps ErrNoEtcd when there is none.
func EtcdBinary() (string, error) {
	dir, err := TestbinsDir()
	if err != nil {
		return "", fmt.Errorf("%w (%w)", ErrNoEtcd, err)
	}
	bin := filepath.Join(dir, "etcd")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%w (%w)", ErrNoEtcd, err)
	}
	return bin, nil
}

// StartEtcd starts a one-member etcd (the test binaries' own, a real
// cluster as in production rather than ipamd's embedded one) on free
// loopback ports, with its data in a temporary folder, and returns its
// client URL for Options.EtcdEndpoints; it is stopped when the test ends.
// Without the binary the test is skipped, saying why, unless
// BEACON_TESTBINS_REQUIRED is set: then it fails.
func StartEtcd(t testing.TB) string {
	t.Helper()
	bin, err := EtcdBinary()
	if errors.Is(err, ErrNoEtcd) && os.Getenv("BEACON_TESTBINS_REQUIRED") == "" {
		t.Skipf("SKIP (needs a real etcd): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ports, err := loopback.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cmd := exec.Command(bin,
		"--name", "ipamtest", "--data-dir", filepath.Join(t.TempDir(), "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "ipamtest="+peer, "--unsafe-no-fsync", "--log-level", "warn")
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("ipamtest: start etcd: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(StopTimeout):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	testwait.For(t, StartTimeout, "etcd at "+client, func() error {
		select {
		case <-exited:
			return fmt.Errorf("etcd exited:\n%s", out.String())
		default:
		}
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, client+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"health":"true"`)) {
			return fmt.Errorf("/health = %d %s", resp.StatusCode, body)
		}
		return nil
	})
	return client
}

// lockedBuffer keeps a process's output for the test to show.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
