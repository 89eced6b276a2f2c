package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// binDir returns the folder holding ipamd, announcerd and beaconctl:
// $BEACON_BIN, or a folder they are built into once per test run.
func binDir(t *testing.T) string {
	t.Helper()
	d, err := e2e.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// daemon is a running ipamd.
type daemon struct {
	cmd    *exec.Cmd
	grpc   string // gRPC address
	ops    string // HTTP ops address
	logs   *bytes.Buffer
	logMu  *sync.Mutex
	grew   chan struct{} // closed (and replaced) when a log line arrives
	exited chan error
}

// startIPAMD starts ipamd with args on loopback ports it picks itself, and
// waits until it serves.
func startIPAMD(t *testing.T, args ...string) *daemon {
	t.Helper()
	bin := filepath.Join(binDir(t), "ipamd")
	args = append([]string{"--listen", "127.0.0.1:0", "--ops-listen", "127.0.0.1:0", "--log-level", "debug"}, args...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, logs: new(bytes.Buffer), logMu: new(sync.Mutex), grew: make(chan struct{}), exited: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			d.logMu.Lock()
			d.logs.WriteString(line + "\n")
			close(d.grew)
			d.grew = make(chan struct{})
			d.logMu.Unlock()
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "ipamd serving" && !signalled {
				d.grpc, _ = rec["listen"].(string)
				d.ops, _ = rec["ops"].(string)
				signalled = true
				close(ready)
			}
		}
		d.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			t.Logf("ipamd killed at cleanup: %v", <-d.exited)
		}
		if t.Failed() {
			t.Logf("ipamd logs:\n%s", d.logText())
		}
	})
	select {
	case <-ready:
	case err := <-d.exited:
		t.Fatalf("ipamd exited before serving: %v\n%s", err, d.logText())
	case <-time.After(60 * time.Second):
		t.Fatalf("ipamd not serving after 60s\n%s", d.logText())
	}
	return d
}

func (d *daemon) logText() string {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	return d.logs.String()
}

// waitLogs returns ipamd's log once ok holds for it, or after 10 s
// without (ipamd writes its log through a pipe: a line about a call that
// has returned may still be on its way).
func (d *daemon) waitLogs(ok func(logs string) bool) string {
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		d.logMu.Lock()
		logs, grew := d.logs.String(), d.grew
		d.logMu.Unlock()
		if ok(logs) {
			return logs
		}
		select {
		case <-grew:
		case <-deadline.C:
			return logs
		}
	}
}

// stop sends SIGTERM and returns how long ipamd took to exit, and how.
func (d *daemon) stop(t *testing.T) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.exited:
		return time.Since(start), err
	case <-time.After(30 * time.Second):
		t.Fatalf("ipamd still running 30s after SIGTERM\n%s", d.logText())
	}
	return 0, nil
}

// ctl runs beaconctl against d and returns its stdout; it fails the test on
// a non-zero exit unless wantFail.
func ctl(t *testing.T, d *daemon, wantFail bool, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir(t), "beaconctl"), append([]string{"--plaintext", "--server", d.grpc}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if (err != nil) != wantFail {
		t.Fatalf("beaconctl %s: err=%v wantFail=%v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, wantFail, stdout.String(), stderr.String())
	}
	if wantFail {
		return stderr.String()
	}
	return stdout.String()
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
