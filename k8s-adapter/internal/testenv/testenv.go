// Package testenv starts the real Kubernetes API server the adapter's tests
// run against, on loopback ports: etcd and kube-apiserver built by
// tests/testbins (see `make testbins`). The IPAM replicas come from
// pkg/ipamtest. It does not import client-go: it hands out the API server's
// address and token.
//
// Only tests import this package.
package testenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
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

	"github.com/beaconlb/beacon/pkg/ipamtest"
	"github.com/beaconlb/beacon/pkg/loopback"
)

// ErrNoTestbins means the Kubernetes test binaries are not built.
var ErrNoTestbins = errors.New("kube-apiserver and etcd not found; run `make testbins`")

// ServiceCIDRs is the API server's ClusterIP range: documentation ranges,
// never sent traffic.
const ServiceCIDRs = "203.0.113.192/26,2001:db8:ffff:ffff::/112"

// RepoRoot returns the repository root: the first parent of the working
// directory holding go.work.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory")
		}
		dir = parent
	}
}

// TestbinsDir returns the folder of the Kubernetes test binaries:
// $BEACON_TESTBINS, else $BEACON_CACHE/testbins, else .cache/testbins under
// the repository, as tests/testbins/build.sh writes them
// (ipamtest.TestbinsDir).
func TestbinsDir() (string, error) { return ipamtest.TestbinsDir() }

// proc is a child process with its output kept.
type proc struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
	err    error
	onLine func(string)
}

func startProc(name, bin string, args []string, onLine func(string)) (*proc, error) {
	p := &proc{name: name, cmd: exec.Command(bin, args...), exited: make(chan struct{}), onLine: onLine}
	r, w := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = w, w
	// Killed with the test process, even if it dies without cleaning up.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			if p.out.Len() < 8<<20 {
				p.out.WriteString(line + "\n")
			}
			p.mu.Unlock()
			if p.onLine != nil {
				p.onLine(line)
			}
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	go func() {
		p.err = p.cmd.Wait()
		_ = w.Close()
		close(p.exited)
	}()
	return p, nil
}

// Output returns what the process printed so far.
func (p *proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// stop sends sig and waits up to d, then kills.
func (p *proc) stop(sig syscall.Signal, d time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		return nil
	case <-time.After(d):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within %s; killed", p.name, d)
	}
}

// Cluster is a running etcd and kube-apiserver.
type Cluster struct {
	// Host is the API server's URL, https://127.0.0.1:PORT.
	Host string
	// Token is a bearer token of a system:masters user.
	Token string
	// CAFile is the API server's self-signed certificate.
	CAFile string
	// Dir holds the processes' data; removed by Stop.
	Dir string
	// Kubeconfig is a kubeconfig file for Host and Token.
	Kubeconfig string

	etcd, apiserver *proc
}

// StartCluster starts etcd and kube-apiserver in a temporary folder and
// waits until the API server is ready.
func StartCluster(ctx context.Context) (*Cluster, error) {
	bins, err := TestbinsDir()
	if err != nil {
		return nil, err
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bins, b)); err != nil {
			return nil, fmt.Errorf("%w (looked in %s)", ErrNoTestbins, bins)
		}
	}
	dir, err := os.MkdirTemp("", "beacon-kube-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Token: "beacon-test-token", CAFile: filepath.Join(dir, "certs", "apiserver.crt")}
	fail := func(err error) (*Cluster, error) {
		c.Stop()
		return nil, err
	}
	ports, err := loopback.FreePorts(3)
	if err != nil {
		return fail(err)
	}
	client, peer, api := ports[0], ports[1], ports[2]
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	c.etcd, err = startProc("etcd", filepath.Join(bins, "etcd"), []string{
		"--name", "default", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default=" + peerURL,
		"--unsafe-no-fsync", "--log-level", "warn",
	}, nil)
	if err != nil {
		return fail(err)
	}
	if err := writeFile(filepath.Join(dir, "tokens.csv"), c.Token+",admin,admin-uid,system:masters\n"); err != nil {
		return fail(err)
	}
	if err := serviceAccountKeys(dir); err != nil {
		return fail(err)
	}
	c.Host = fmt.Sprintf("https://127.0.0.1:%d", api)
	c.apiserver, err = startProc("kube-apiserver", filepath.Join(bins, "kube-apiserver"), []string{
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(api), "--advertise-address=127.0.0.1",
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--etcd-servers=" + clientURL,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		// Admission as in a real cluster, for the adapter's
		// ValidatingAdmissionPolicy and webhook (on by default; named so
		// that a test relying on them does not depend on the default).
		"--enable-admission-plugins=ValidatingAdmissionPolicy,ValidatingAdmissionWebhook",
		"--service-cluster-ip-range=" + ServiceCIDRs,
		"--endpoint-reconciler-type=none",
		"--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000",
		"--v=0",
	}, nil)
	if err != nil {
		return fail(err)
	}
	if err := c.waitReady(ctx); err != nil {
		return fail(err)
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := c.WriteKubeconfig(c.Kubeconfig, c.Token); err != nil {
		return fail(err)
	}
	return c, nil
}

// WriteKubeconfig writes a kubeconfig file for the API server that
// authenticates with token.
func (c *Cluster) WriteKubeconfig(path, token string) error {
	return writeFile(path, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: user
  user: {token: %q}
contexts:
- name: test
  context: {cluster: test, user: user}
current-context: test
`, c.Host, token))
}

func (c *Cluster) waitReady(ctx context.Context) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a test API server with a self-signed certificate
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.Token)
		resp, err := hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-c.apiserver.exited:
			return fmt.Errorf("kube-apiserver exited: %w\n%s", c.apiserver.err, tail(c.apiserver.Output()))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready after 60s\n%s", tail(c.apiserver.Output()))
		}
	}
}

// Kubectl runs the kubectl built by tests/testbins against the cluster with
// stdin as input, and returns its combined output.
func (c *Cluster) Kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	bins, err := TestbinsDir()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bins, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Logs returns the tail of the API server's and etcd's output.
func (c *Cluster) Logs() string {
	var b bytes.Buffer
	if c.apiserver != nil {
		b.WriteString("--- kube-apiserver\n" + tail(c.apiserver.Output()))
	}
	if c.etcd != nil {
		b.WriteString("--- etcd\n" + tail(c.etcd.Output()))
	}
	return b.String()
}

// Stop stops the API server, then etcd (the other order makes the API
// server hang), and removes Dir.
func (c *Cluster) Stop() {
	if c.apiserver != nil {
		_ = c.apiserver.stop(syscall.SIGTERM, 15*time.Second)
	}
	if c.etcd != nil {
		_ = c.etcd.stop(syscall.SIGTERM, 10*time.Second)
	}
	_ = os.RemoveAll(c.Dir)
}

func tail(s string) string {
	const n = 6000
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func writeFile(path, content string) error {
	return os.WriteFile(path, []byte(content), 0o600)
}

// serviceAccountKeys writes sa.key and sa.pub into dir.
func serviceAccountKeys(dir string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "sa.key"), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, "sa.pub"), string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})))
}
