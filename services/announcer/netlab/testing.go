package netlab

import (
	"os"
	"os/exec"
	"testing"
)

// NewForTest returns a Lab closed in t.Cleanup. It skips the test, loudly,
// when not running as root or when ip is missing; when the test failed it
// logs the tail of every process's log before cleaning up.
func NewForTest(t testing.TB) *Lab {
	t.Helper()
	RequireBinaries(t, "ip", "sysctl", "tc")
	l, err := New(t.Logf)
	if err != nil {
		t.Fatalf("netlab: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range l.Procs() {
				t.Logf("---- %s (pid %d) %s ----\n%s", p.Name, p.PID, p.LogPath, p.Tail(40))
			}
		}
		if err := l.Close(); err != nil {
			t.Errorf("netlab: close: %v", err)
		}
	})
	return l
}

// RequireRoot skips the test, loudly, unless it runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: netlab needs root (network namespaces); `make test` runs as root")
	}
}

// RequireBinaries skips the test, loudly, unless it runs as root and every
// named program is on PATH or is an absolute path that exists.
func RequireBinaries(t testing.TB, names ...string) {
	t.Helper()
	RequireRoot(t)
	for _, n := range names {
		if n != "" && n[0] == '/' {
			if _, err := os.Stat(n); err != nil {
				t.Skipf("SKIPPED: %s is missing (%v); install the Debian packages listed in the netlab package doc", n, err)
			}
			continue
		}
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("SKIPPED: %s is not on PATH; install the Debian packages listed in the netlab package doc", n)
		}
	}
}
