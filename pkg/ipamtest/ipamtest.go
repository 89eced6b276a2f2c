// Package ipamtest starts real IPAM replicas for the tests (and the
// benchmarks) of every module: ipamd processes on loopback ports, sharing
// one etcd (the first replica's embedded one, or endpoints the test gives),
// plaintext or TLS with throwaway certificates from devcerts, and it hands
// out gRPC connections to them. Nothing of services/ipam is imported: the
// binary is $BEACON_BIN/ipamd when BEACON_BIN is set (`make build`), else
// one built with `go build` once per test binary.
//
// Only tests and benchmarks import this package.
package ipamtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Package is the import path of ipamd.
const Package = "github.com/beaconlb/beacon/services/ipam/cmd/ipamd"

// The binary, built at most once per test binary, and the replica tests
// share (Shared): a test binary is one process, so these are its state.
var (
	binOnce sync.Once
	binPath string
	binDir  string
	binErr  error

	sharedOnce sync.Once
	shared     *Replica
	sharedDir  string
	sharedErr  error
)

// Binary returns the path of ipamd: $BEACON_BIN/ipamd when BEACON_BIN is
// set (an error if it is missing there), else one built with `go build`
// into a temporary folder, once per process; Cleanup removes it.
func Binary() (string, error) {
	binOnce.Do(func() {
		if d := os.Getenv("BEACON_BIN"); d != "" {
			binPath = filepath.Join(d, "ipamd")
			if _, err := os.Stat(binPath); err != nil {
				binErr = fmt.Errorf("ipamtest: BEACON_BIN=%s: %w (run `make build`)", d, err)
			}
			return
		}
		if binDir, binErr = os.MkdirTemp("", "beacon-ipamtest-bin-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "ipamd")
		if out, err := exec.Command("go", "build", "-o", binPath, Package).CombinedOutput(); err != nil {
			binErr = fmt.Errorf("ipamtest: go build %s: %w\n%s", Package, err, out)
		}
	})
	return binPath, binErr
}

// Main runs a test binary's tests, then Cleanup, and exits. Call it from
// TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// Cleanup kills the shared replica and removes its data and the ipamd
// Binary built. Main calls it; a TestMain of its own defers it.
func Cleanup() {
	if shared != nil {
		shared.Kill()
	}
	if sharedDir != "" {
		_ = os.RemoveAll(sharedDir)
	}
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}

// Shared returns a replica with an embedded etcd and --release-hold 0s,
// shared by every test of the test binary that asks for it: tests using it
// keep to tenants, pools and address ranges of their own. It lives until
// Cleanup.
func Shared(t testing.TB) *Replica {
	t.Helper()
	bin := mustBinary(t)
	sharedOnce.Do(func() {
		if sharedDir, sharedErr = os.MkdirTemp("", "beacon-ipamtest-shared-"); sharedErr != nil {
			return
		}
		shared, sharedErr = StartReplica(context.Background(), bin, "--data-dir", sharedDir, "--release-hold", "0s")
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	if shared.Exited() {
		t.Fatalf("the shared ipamd has exited:\n%s", shared.Logs())
	}
	return shared
}

func mustBinary(t testing.TB) string {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
