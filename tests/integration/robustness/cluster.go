package robustness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/beaconlb/beacon/pkg/loopback"
)

// proc is one process of the cluster, started again with the same
// arguments after a kill.
type proc struct {
	name string
	argv []string
	log  string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool // SIGSTOPped
}

func (p *proc) start() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "---- %s start %s\n", p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done, p.stopped = cmd, done, false
	p.mu.Unlock()
	return nil
}

// running reports whether the process runs (or is stopped).
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s not started", p.name)
	}
	if sig == syscall.SIGSTOP {
		p.stopped = true
	}
	if sig == syscall.SIGCONT {
		p.stopped = false
	}
	return p.cmd.Process.Signal(sig)
}

// kill sends SIGKILL and waits for the exit.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// terminate sends SIGTERM and waits up to grace, then SIGKILL.
func (p *proc) terminate(grace time.Duration) {
	p.mu.Lock()
	cmd, done, stopped := p.cmd, p.done, p.stopped
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	if stopped {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		p.kill()
	}
}

func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Cluster is a 3-member etcd cluster of real etcd processes and IPAM
// replicas (real ipamd processes) using it. Each replica reaches etcd on
// loopback addresses of its own (127.X.1.R), so that it alone can be cut
// from etcd with iptables.
type Cluster struct {
	dir       string
	etcd      []*proc
	etcdPorts []int // client ports
	replicas  []*proc
	// Addrs are the replicas' gRPC addresses; Ops their ops (health) ones.
	Addrs, ops []string
	// cutNet is the 127.X.1.0/24 whose .R is replica R's way to etcd.
	cutNet string
	// cutting reports that iptables works here (root): cuts are possible.
	cutting bool
}

// ClusterConfig says what to start.
type ClusterConfig struct {
	Etcd     string // the etcd binary
	IPAMD    string // the ipamd binary
	Dir      string // logs and data
	Replicas int
	Members  int
	// Cut enables cutting replicas from etcd (needs root and iptables).
	Cut bool
}

// StartCluster starts the etcd members, then the replicas, and waits until
// every replica serves.
func StartCluster(ctx context.Context, cfg ClusterConfig) (c *Cluster, err error) {
	c = &Cluster{dir: cfg.Dir}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	ports, err := loopback.FreePorts(2*cfg.Members + 2*cfg.Replicas)
	if err != nil {
		return nil, err
	}
	// A /24 of loopback addresses for this run, from its PID, so that
	// concurrent runs on one machine cut only their own replicas.
	c.cutNet = fmt.Sprintf("127.%d.%d", 100+os.Getpid()%100, 1+os.Getpid()/100%250)
	c.cutting = cfg.Cut
	var initial []string
	for i := range cfg.Members {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	for i := range cfg.Members {
		client, peer := ports[2*i], ports[2*i+1]
		urls := []string{fmt.Sprintf("http://127.0.0.1:%d", client)}
		for r := range cfg.Replicas {
			urls = append(urls, fmt.Sprintf("http://%s.%d:%d", c.cutNet, r+1, client))
		}
		p := &proc{name: fmt.Sprintf("etcd-m%d", i), log: filepath.Join(cfg.Dir, fmt.Sprintf("etcd-m%d.log", i)), argv: []string{cfg.Etcd,
			"--name", fmt.Sprintf("m%d", i),
			"--data-dir", filepath.Join(cfg.Dir, fmt.Sprintf("etcd-m%d", i)),
			"--listen-client-urls", strings.Join(urls, ","),
			"--advertise-client-urls", urls[0],
			"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
			"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new", "--initial-cluster-token", "robustness",
			"--log-level", "warn",
		}}
		c.etcd = append(c.etcd, p)
		c.etcdPorts = append(c.etcdPorts, client)
		if err := p.start(); err != nil {
			return nil, err
		}
	}
	if err := c.waitEtcd(ctx, 60*time.Second); err != nil {
		return nil, err
	}
	for r := range cfg.Replicas {
		grpcPort, opsPort := ports[2*cfg.Members+2*r], ports[2*cfg.Members+2*r+1]
		var eps []string
		for _, port := range c.etcdPorts {
			eps = append(eps, fmt.Sprintf("http://%s.%d:%d", c.cutNet, r+1, port))
		}
		addr := fmt.Sprintf("127.0.0.1:%d", grpcPort)
		ops := fmt.Sprintf("127.0.0.1:%d", opsPort)
		p := &proc{name: fmt.Sprintf("ipamd-%d", r), log: filepath.Join(cfg.Dir, fmt.Sprintf("ipamd-%d.log", r)), argv: []string{cfg.IPAMD,
			"--listen", addr, "--ops-listen", ops,
			"--etcd-endpoints", strings.Join(eps, ","),
			"--release-hold", "0s", "--shutdown-grace", "2s", "--log-level", "info",
		}}
		c.replicas = append(c.replicas, p)
		c.Addrs = append(c.Addrs, addr)
		c.ops = append(c.ops, ops)
		if err := p.start(); err != nil {
			return nil, err
		}
	}
	for r := range c.replicas {
		if err := c.WaitReplica(ctx, r, 60*time.Second); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Close stops every process and lifts every cut.
func (c *Cluster) Close() {
	if c.cutting {
		for r := range c.replicas {
			_ = c.Heal(context.Background(), r)
		}
	}
	var wg sync.WaitGroup
	for _, p := range append(append([]*proc{}, c.replicas...), c.etcd...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.terminate(5 * time.Second)
		}()
	}
	wg.Wait()
}

// WaitReplica waits until replica r answers ready on its ops port.
func (c *Cluster) WaitReplica(ctx context.Context, r int, timeout time.Duration) error {
	return poll(ctx, timeout, func() error {
		if !c.replicas[r].running() {
			return fmt.Errorf("%s exited:\n%s", c.replicas[r].name, c.replicas[r].tail(20))
		}
		return httpOK(ctx, "http://"+c.ops[r]+"/readyz")
	})
}

// KillReplica SIGKILLs replica r; RestartReplica starts it again.
func (c *Cluster) KillReplica(r int) { c.replicas[r].kill() }

// RestartReplica starts replica r again and waits until it serves.
func (c *Cluster) RestartReplica(ctx context.Context, r int) error {
	if err := c.replicas[r].start(); err != nil {
		return err
	}
	return c.WaitReplica(ctx, r, 60*time.Second)
}

// StopReplica freezes replica r (SIGSTOP); ContReplica thaws it.
func (c *Cluster) StopReplica(r int) error { return c.replicas[r].signal(syscall.SIGSTOP) }

// ContReplica thaws replica r (SIGCONT).
func (c *Cluster) ContReplica(r int) error { return c.replicas[r].signal(syscall.SIGCONT) }

// Cut drops every packet between replica r and etcd (both ways), as a
// partition would: connections hang rather than fail.
func (c *Cluster) Cut(ctx context.Context, r int) error {
	addr := fmt.Sprintf("%s.%d", c.cutNet, r+1)
	for _, rule := range [][]string{{"-d", addr}, {"-s", addr}} {
		args := append([]string{"-w", "5", "-I", "INPUT"}, rule...)
		args = append(args, "-m", "comment", "--comment", "beacon-robustness", "-j", "DROP")
		if out, err := exec.CommandContext(ctx, "iptables", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %v: %w: %s", args, err, out)
		}
	}
	return nil
}

// Heal lifts a Cut (every rule it added, however many times).
func (c *Cluster) Heal(ctx context.Context, r int) error {
	addr := fmt.Sprintf("%s.%d", c.cutNet, r+1)
	for _, rule := range [][]string{{"-d", addr}, {"-s", addr}} {
		for {
			args := append([]string{"-w", "5", "-D", "INPUT"}, rule...)
			args = append(args, "-m", "comment", "--comment", "beacon-robustness", "-j", "DROP")
			if err := exec.CommandContext(ctx, "iptables", args...).Run(); err != nil {
				break // no such rule left
			}
		}
	}
	return nil
}

// EtcdLeader returns the index of the member that leads.
func (c *Cluster) EtcdLeader(ctx context.Context) (int, error) {
	for i, port := range c.etcdPorts {
		if !c.etcd[i].running() {
			continue
		}
		st, err := etcdStatus(ctx, port)
		if err != nil {
			continue
		}
		if st.Leader != "" && st.Leader == st.Header.MemberID {
			return i, nil
		}
	}
	return -1, errors.New("no etcd member leads")
}

// KillEtcd SIGKILLs member i; RestartEtcd starts it again with its data.
func (c *Cluster) KillEtcd(i int) { c.etcd[i].kill() }

// RestartEtcd starts member i again and waits until the cluster answers.
func (c *Cluster) RestartEtcd(ctx context.Context, i int) error {
	if err := c.etcd[i].start(); err != nil {
		return err
	}
	return c.waitEtcd(ctx, 60*time.Second)
}

// Tail returns the end of every process's log.
func (c *Cluster) Tail(n int) string {
	var b strings.Builder
	for _, p := range append(append([]*proc{}, c.replicas...), c.etcd...) {
		fmt.Fprintf(&b, "---- %s\n%s\n", p.name, p.tail(n))
	}
	return b.String()
}

func (c *Cluster) waitEtcd(ctx context.Context, timeout time.Duration) error {
	return poll(ctx, timeout, func() error {
		_, err := c.EtcdLeader(ctx)
		return err
	})
}

type statusResponse struct {
	Header struct {
		MemberID string `json:"member_id"`
	} `json:"header"`
	Leader string `json:"leader"`
}

// etcdStatus asks a member for its status through etcd's JSON gateway.
func etcdStatus(ctx context.Context, port int) (statusResponse, error) {
	var st statusResponse
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(port)+"/v3/maintenance/status", bytes.NewReader([]byte("{}")))
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer func() { _ = resp.Body.Close() }()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, err
	}
	return st, nil
}

func httpOK(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// poll calls f every 50 ms until it returns nil, or timeout.
func poll(ctx context.Context, timeout time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
