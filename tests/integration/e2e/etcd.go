package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/beaconlb/beacon/pkg/ipamtest"
)

// ErrNoEtcd means the etcd test binary is missing: `make testbins` builds
// it. It is pkg/ipamtest's, where the test binaries are found.
var ErrNoEtcd = ipamtest.ErrNoEtcd

// EtcdBinary returns the etcd built by tests/testbins: in $BEACON_TESTBINS,
// else $BEACON_CACHE/testbins, else .cache/testbins beside the go.work
// above the working directory (ipamtest.EtcdBinary). It wraps ErrNoEtcd
// when there is none.
func EtcdBinary() (string, error) { return ipamtest.EtcdBinary() }

// EtcdArgs are the flags of a one-member etcd with its data in dir,
// serving clients on clientURL and its peer port on peerURL (fsync on, as
// in production).
func EtcdArgs(dir, clientURL, peerURL string) []string {
	return []string{
		"--name", "default", "--data-dir", dir,
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default=" + peerURL, "--log-level", "warn",
	}
}

// Etcd is an etcd process on loopback in the caller's namespace.
type Etcd struct {
	// Endpoint is its client URL.
	Endpoint string

	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
}

// StartEtcd starts bin as a one-member cluster with its data in dir, on
// loopback ports that were free a moment ago, and waits (up to 30 s) until
// it accepts connections.
func StartEtcd(bin, dir string) (*Etcd, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	e := &Etcd{Endpoint: clientURL, exited: make(chan struct{})}
	e.cmd = exec.Command(bin, EtcdArgs(dir, clientURL, peerURL)...) //nolint:gosec // the test's own etcd
	w := &lockedWriter{&e.mu, &e.out}
	e.cmd.Stdout, e.cmd.Stderr = w, w
	// Killed with the test process, even if it dies without cleaning up.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := e.cmd.Start(); err != nil {
		return nil, fmt.Errorf("e2e: start etcd: %w", err)
	}
	go func() { _ = e.cmd.Wait(); close(e.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-e.exited:
			return nil, fmt.Errorf("e2e: etcd exited before serving:\n%s", e.Output())
		default:
		}
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0]), time.Second); err == nil {
			_ = c.Close()
			return e, nil
		}
		if time.Now().After(deadline) {
			e.Stop()
			return nil, fmt.Errorf("e2e: etcd not serving after 30 s:\n%s", e.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago (another process may take one before etcd binds it).
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Stop ends etcd (SIGTERM, SIGKILL after 10 s).
func (e *Etcd) Stop() {
	if e.cmd.Process == nil {
		return
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.exited:
	case <-time.After(10 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.exited
	}
}

// Output returns what etcd printed.
func (e *Etcd) Output() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.out.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
