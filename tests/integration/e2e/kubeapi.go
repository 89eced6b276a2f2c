package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// KubeAPI is a kube-apiserver (built by tests/testbins) on loopback, with
// its data under its own prefix of a shared etcd, so that several API
// servers — several "clusters", each with its own ServiceAccount signing
// key — can share one etcd process.
type KubeAPI struct {
	// Host is https://127.0.0.1:PORT.
	Host string
	// CAFile holds the API server's self-signed certificate and its CA.
	CAFile string
	// AdminToken is a bearer token of a system:masters user; AdminTokenFile
	// holds it.
	AdminToken, AdminTokenFile string

	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
	client *http.Client
}

// StartKubeAPI starts kube-apiserver with its files in dir and its data in
// etcd under /PREFIX, and waits (up to 90 s) until it is ready.
func StartKubeAPI(ctx context.Context, etcd *Etcd, dir, prefix string) (*KubeAPI, error) {
	etcdBin, err := EtcdBinary()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(filepath.Dir(etcdBin), "kube-apiserver")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%w (kube-apiserver: %w)", ErrNoEtcd, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	k := &KubeAPI{
		CAFile: filepath.Join(dir, "certs", "apiserver.crt"), AdminToken: "beacon-admin-" + prefix,
		AdminTokenFile: filepath.Join(dir, "admin-token"), exited: make(chan struct{}),
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(k.AdminToken+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(k.AdminTokenFile, []byte(k.AdminToken+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := serviceAccountKeys(dir); err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	k.Host = "https://127.0.0.1:" + strconv.Itoa(ports[0])
	k.cmd = exec.Command(bin, //nolint:gosec // the test's own API server
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[0]), "--advertise-address=127.0.0.1",
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--etcd-servers="+etcd.Endpoint, "--etcd-prefix=/"+prefix,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=203.0.113.192/26",
		"--endpoint-reconciler-type=none", "--v=0")
	w := &lockedWriter{&k.mu, &k.out}
	k.cmd.Stdout, k.cmd.Stderr = w, w
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		return nil, fmt.Errorf("e2e: start kube-apiserver: %w", err)
	}
	go func() { _ = k.cmd.Wait(); close(k.exited) }()
	k.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the test's own API server, self-signed
	}}
	deadline := time.Now().Add(90 * time.Second)
	for {
		if _, err := k.Do(ctx, http.MethodGet, "/readyz", nil); err == nil {
			return k, nil
		}
		select {
		case <-k.exited:
			return nil, fmt.Errorf("e2e: kube-apiserver exited:\n%s", k.Output())
		case <-ctx.Done():
			k.Stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			k.Stop()
			return nil, fmt.Errorf("e2e: kube-apiserver not ready after 90 s:\n%s", k.Output())
		}
	}
}

// Do sends a request as the admin and returns the body of a 2xx answer.
func (k *KubeAPI) Do(ctx context.Context, method, path string, body any) ([]byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, k.Host+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+k.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return out, fmt.Errorf("e2e: %s %s: %s: %s", method, path, resp.Status, out)
	}
	return out, nil
}

// Create posts obj to path and returns the created object's uid.
func (k *KubeAPI) Create(ctx context.Context, path string, obj any) (string, error) {
	out, err := k.Do(ctx, http.MethodPost, path, obj)
	if err != nil {
		return "", err
	}
	var m struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(out, &m); err != nil {
		return "", err
	}
	return m.Metadata.UID, nil
}

// PodToken asks the TokenRequest API for a token of ServiceAccount sa in
// namespace ns for audience, bound to the Pod pod (uid): the token the
// kubelet projects into that Pod.
func (k *KubeAPI) PodToken(ctx context.Context, ns, sa, audience, pod, uid string) (string, error) {
	out, err := k.Do(ctx, http.MethodPost, "/api/v1/namespaces/"+ns+"/serviceaccounts/"+sa+"/token", map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"spec": map[string]any{
			"audiences": []string{audience}, "expirationSeconds": 3600,
			"boundObjectRef": map[string]any{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid},
		},
	})
	if err != nil {
		return "", err
	}
	var tr struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal(out, &tr); err != nil {
		return "", err
	}
	if tr.Status.Token == "" {
		return "", errors.New("e2e: TokenRequest returned no token")
	}
	return tr.Status.Token, nil
}

// Output returns what the API server printed.
func (k *KubeAPI) Output() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.out.String()
}

// Stop ends the API server (SIGTERM, SIGKILL after 15 s). Stop it before
// its etcd: with etcd gone first it hangs.
func (k *KubeAPI) Stop() {
	if k.cmd.Process == nil {
		return
	}
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.exited:
	case <-time.After(15 * time.Second):
		_ = k.cmd.Process.Kill()
		<-k.exited
	}
}

// serviceAccountKeys writes an RSA key pair for signing ServiceAccount
// tokens: sa.key and sa.pub in dir.
func serviceAccountKeys(dir string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
}
