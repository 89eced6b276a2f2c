package integration

import (
	"context"
	"os/exec"
	"testing"

	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// requireLab skips the test, loudly, unless it runs as root with every
// named program installed (`make deps` installs them).
func requireLab(t *testing.T, programs ...string) {
	t.Helper()
	if err := e2e.RequireRoot(); err != nil {
		t.Skipf("SKIPPED %s: %v; run as root (make test-integration does in CI)", t.Name(), err)
	}
	for _, p := range append([]string{"ip", "sysctl", "tc"}, programs...) {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED %s: %s is not installed; run `make deps`", t.Name(), p)
		}
	}
}

// newCluster builds an e2e.Cluster closed in t.Cleanup; when the test
// failed, the tails of every process's log are printed first.
func newCluster(t *testing.T, opts e2e.Options) *e2e.Cluster {
	t.Helper()
	opts.Bin = binDir(t)
	opts.Logf = t.Logf
	c, err := e2e.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range c.Lab.Procs() {
				t.Logf("---- %s (pid %d) %s ----\n%s", p.Name, p.PID, p.LogPath, p.Tail(60))
			}
		}
		if err := c.Close(); err != nil {
			t.Errorf("closing the lab: %v", err)
		}
	})
	return c
}
