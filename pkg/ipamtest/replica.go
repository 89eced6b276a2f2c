package ipamtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StartTimeout is how long Start waits for an ipamd to log that it serves.
const StartTimeout = time.Minute

// StopTimeout is how long a stop waits after SIGTERM before it kills.
const StopTimeout = 15 * time.Second

// Replica is one running ipamd process.
type Replica struct {
	// Addr is the gRPC address, Ops the HTTP ops address.
	Addr, Ops string

	cmd    *exec.Cmd
	mu     sync.Mutex
	logs   bytes.Buffer
	etcd   []string
	exited chan struct{}
	err    error
}

// StartReplica runs bin with --listen and --ops-listen on free loopback
// ports and --log-level info, then args (a later --listen wins), and waits
// until it logs "ipamd serving" (StartTimeout at the most). The process is
// killed if the test process dies without stopping it.
func StartReplica(ctx context.Context, bin string, args ...string) (*Replica, error) {
	args = append([]string{"--listen", "127.0.0.1:0", "--ops-listen", "127.0.0.1:0", "--log-level", "info"}, args...)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ipamtest: start %s: %w", bin, err)
	}
	r := &Replica{cmd: cmd, exited: make(chan struct{})}
	ready := make(chan struct{})
	go r.read(stderr, ready)
	select {
	case <-ready:
		return r, nil
	case <-r.exited:
		return nil, fmt.Errorf("ipamtest: ipamd exited before serving: %w\n%s", r.err, r.Logs())
	case <-time.After(StartTimeout):
		r.Kill()
		return nil, fmt.Errorf("ipamtest: ipamd not serving after %s\n%s", StartTimeout, r.Logs())
	case <-ctx.Done():
		r.Kill()
		return nil, ctx.Err()
	}
}

// read keeps ipamd's log, takes its addresses from it, closes ready once
// it serves, and records how the process ended.
func (r *Replica) read(stderr io.Reader, ready chan<- struct{}) {
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		r.mu.Lock()
		if r.logs.Len() < 8<<20 {
			r.logs.WriteString(line + "\n")
		}
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil {
			switch rec["msg"] {
			case "embedded etcd started":
				eps, _ := rec["endpoints"].([]any)
				for _, e := range eps {
					if s, ok := e.(string); ok {
						r.etcd = append(r.etcd, s)
					}
				}
			case "ipamd serving":
				if !signalled {
					r.Addr, _ = rec["listen"].(string)
					r.Ops, _ = rec["ops"].(string)
					signalled = true
					close(ready)
				}
			}
		}
		r.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, stderr)
	r.err = r.cmd.Wait()
	close(r.exited)
}

// Logs returns what the process has logged so far.
func (r *Replica) Logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logs.String()
}

// Tail returns the last n bytes of the log at the most.
func (r *Replica) Tail(n int) string {
	s := r.Logs()
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// EtcdEndpoints joins the client URLs of the embedded etcd this replica
// runs, if it runs one, for another replica's --etcd-endpoints.
func (r *Replica) EtcdEndpoints() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.etcd, ",")
}

// Kill kills the process (SIGKILL) and waits for it: a crash.
func (r *Replica) Kill() {
	if r.Exited() {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.exited
}

// Stop sends SIGTERM and waits up to timeout, then kills.
func (r *Replica) Stop(timeout time.Duration) error {
	if r.Exited() {
		return nil
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-r.exited:
		return r.err
	case <-time.After(timeout):
		r.Kill()
		return errors.New("ipamtest: ipamd did not stop on SIGTERM; killed")
	}
}

// Exited reports whether the process has ended.
func (r *Replica) Exited() bool {
	select {
	case <-r.exited:
		return true
	default:
		return false
	}
}
