// Package ipamproc runs real ipamd processes for the gateway's tests and
// benchmark: it builds the binary with `go build` (or takes it from
// $BEACON_BIN), starts it on loopback ports of its own choosing, and reads
// its JSON log for the addresses it serves. Nothing of services/ipam is
// imported.
package ipamproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Package is the import path of ipamd.
const Package = "github.com/beaconlb/beacon/services/ipam/cmd/ipamd"

// Binary returns the path of an ipamd binary: $BEACON_BIN/ipamd when
// BEACON_BIN is set, else one built with `go build` into dir.
func Binary(dir string) (string, error) {
	if d := os.Getenv("BEACON_BIN"); d != "" {
		p := filepath.Join(d, "ipamd")
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("ipamproc: BEACON_BIN: %w", err)
		}
		return p, nil
	}
	p := filepath.Join(dir, "ipamd")
	out, err := exec.Command("go", "build", "-o", p, Package).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ipamproc: go build %s: %w\n%s", Package, err, out)
	}
	return p, nil
}

// Proc is a running ipamd.
type Proc struct {
	// Addr is the gRPC address, Ops the HTTP ops address.
	Addr, Ops string
	// EtcdEndpoints are the client URLs of the embedded etcd, if this
	// ipamd runs one; start others with --etcd-endpoints to share it.
	EtcdEndpoints []string

	cmd    *exec.Cmd
	mu     sync.Mutex
	logs   bytes.Buffer
	exited chan struct{}
	err    error
}

// Start runs bin with --listen and --ops-listen on free loopback ports,
// then args, and waits (up to a minute) until it logs "ipamd serving".
func Start(ctx context.Context, bin string, args ...string) (*Proc, error) {
	args = append([]string{"--listen", "127.0.0.1:0", "--ops-listen", "127.0.0.1:0", "--log-level", "info"}, args...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ipamproc: start %s: %w", bin, err)
	}
	p := &Proc{cmd: cmd, exited: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.logs.WriteString(line + "\n")
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil {
				switch rec["msg"] {
				case "embedded etcd started":
					if eps, ok := rec["endpoints"].([]any); ok {
						for _, e := range eps {
							if s, ok := e.(string); ok {
								p.EtcdEndpoints = append(p.EtcdEndpoints, s)
							}
						}
					}
				case "ipamd serving":
					if !signalled {
						p.Addr, _ = rec["listen"].(string)
						p.Ops, _ = rec["ops"].(string)
						signalled = true
						close(ready)
					}
				}
			}
			p.mu.Unlock()
		}
		p.err = cmd.Wait()
		close(p.exited)
	}()
	select {
	case <-ready:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("ipamproc: ipamd exited before serving: %w\n%s", p.err, p.Logs())
	case <-time.After(time.Minute):
		p.Kill()
		return nil, fmt.Errorf("ipamproc: ipamd not serving after a minute\n%s", p.Logs())
	case <-ctx.Done():
		p.Kill()
		return nil, ctx.Err()
	}
}

// StartEmbedded starts an ipamd with an embedded etcd in dataDir.
func StartEmbedded(ctx context.Context, bin, dataDir string, args ...string) (*Proc, error) {
	return Start(ctx, bin, append([]string{"--data-dir", dataDir}, args...)...)
}

// Logs returns what the process has logged so far.
func (p *Proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// Kill kills the process (SIGKILL) and waits for it: a crash.
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Stop sends SIGTERM and waits up to timeout, then kills.
func (p *Proc) Stop(timeout time.Duration) error {
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		p.Kill()
		return errors.New("ipamproc: ipamd did not stop on SIGTERM; killed")
	}
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Endpoints joins EtcdEndpoints for --etcd-endpoints.
func (p *Proc) Endpoints() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.EtcdEndpoints, ",")
}
