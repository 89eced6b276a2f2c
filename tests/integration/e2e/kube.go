package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// KubeAPIPort is where a Kube's API server listens, on its host's
// loopback.
const KubeAPIPort = 6443

// Kube is a kube-apiserver (built by tests/testbins) running inside a lab
// host's namespace (the ctl host, beside the IPAM replicas), and the kubectl and k8s-adapter run there to talk to it: the
// Kubernetes side of the whole chain.
type Kube struct {
	// Kubeconfig is a kubeconfig of a system:masters user.
	Kubeconfig string

	host    *netlab.Host
	testbin string // the testbins directory
	proc    *netlab.Proc
	adapter *netlab.Proc
}

// kubeEtcdURL is where the API server's own etcd serves, on its host's
// loopback.
const kubeEtcdURL = "http://127.0.0.1:2479"

// StartKube starts kube-apiserver in h's namespace, with its own
// one-member etcd (as a cluster's etcd is not the one the IPAM uses) and
// its files in dir, and waits (up to 90 s) until kubectl finds it ready.
func StartKube(ctx context.Context, h *netlab.Host, dir string) (*Kube, error) {
	etcdBin, err := EtcdBinary()
	if err != nil {
		return nil, err
	}
	k := &Kube{host: h, testbin: filepath.Dir(etcdBin), Kubeconfig: filepath.Join(dir, "kubeconfig")}
	bin := filepath.Join(k.testbin, "kube-apiserver")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%w (kube-apiserver: %w)", ErrNoEtcd, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	const token = "beacon-chain-admin"
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(token+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: %s}
contexts:
- name: lab
  context: {cluster: lab, user: admin}
current-context: lab
`, KubeAPIPort, token)
	if err := os.WriteFile(k.Kubeconfig, []byte(kubeconfig), 0o600); err != nil {
		return nil, err
	}
	if err := serviceAccountKeys(dir); err != nil {
		return nil, err
	}
	if _, err := h.Start("kube-etcd", append([]string{etcdBin}, EtcdArgs(filepath.Join(dir, "etcd"), kubeEtcdURL, "http://127.0.0.1:2480")...), nil); err != nil {
		return nil, err
	}
	k.proc, err = h.Start("kube-apiserver", []string{bin,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", KubeAPIPort), "--advertise-address=127.0.0.1",
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--etcd-servers=" + kubeEtcdURL,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=203.0.113.192/26",
		"--endpoint-reconciler-type=none", "--v=0",
	}, nil)
	if err != nil {
		return nil, err
	}
	err = netlab.Eventually(ctx, 90*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
		if exited, err := k.proc.Exited(); exited {
			return fmt.Errorf("kube-apiserver exited (%w): %s", err, k.proc.Tail(30))
		}
		_, err := k.Kubectl(ctx, "get", "--raw", "/readyz")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("e2e: kube-apiserver not ready: %w", err)
	}
	return k, nil
}

// Kubectl runs kubectl (from the testbins) as the admin in the API
// server's namespace and returns its output.
func (k *Kube) Kubectl(ctx context.Context, args ...string) (string, error) {
	return k.host.Run(ctx, filepath.Join(k.testbin, "kubectl"), append([]string{"--kubeconfig", k.Kubeconfig}, args...)...)
}

// Apply writes manifest to a file and runs `kubectl apply -f` on it.
func (k *Kube) Apply(ctx context.Context, name, manifest string) error {
	path := k.host.Path(name + ".yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		return err
	}
	if _, err := k.Kubectl(ctx, "apply", "-f", path); err != nil {
		return fmt.Errorf("e2e: kubectl apply %s: %w", name, err)
	}
	return nil
}

// StartAdapter starts bin/k8s-adapter in the API server's namespace for
// tenant, reaching the IPAM replicas at ipam (comma-separated) directly
// and importing MetalLB's resources from metallb-system, with leader
// election in beacon-system (which must exist).
func (k *Kube) StartAdapter(bin, tenant, ipam string) error {
	p, err := k.host.Start("k8s-adapter", []string{filepath.Join(bin, "k8s-adapter"),
		"--ipam", ipam, "--tenant", tenant, "--kubeconfig", k.Kubeconfig,
		"--leader-elect-namespace", "beacon-system", "--ops-listen", "127.0.0.1:7409",
		"--resync-period", "30s", "--log-level", "debug",
	}, nil)
	if err != nil {
		return err
	}
	k.adapter = p
	return nil
}

// Adapter is the adapter's current process.
func (k *Kube) Adapter() *netlab.Proc { return k.adapter }

// ServiceIngress returns the addresses in a Service's
// status.loadBalancer.ingress.
func (k *Kube) ServiceIngress(ctx context.Context, ns, name string) ([]string, error) {
	out, err := k.Kubectl(ctx, "-n", ns, "get", "service", name, "-o", "json")
	if err != nil {
		return nil, err
	}
	var svc struct {
		Status struct {
			LoadBalancer struct {
				Ingress []struct {
					IP string `json:"ip"`
				} `json:"ingress"`
			} `json:"loadBalancer"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &svc); err != nil {
		return nil, fmt.Errorf("e2e: service %s/%s: %w: %s", ns, name, err, out)
	}
	var ips []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		ips = append(ips, in.IP)
	}
	return ips, nil
}

// EtcdStatus is what an etcd member says of itself.
type EtcdStatus struct {
	MemberID string
	Leader   string
}

// EtcdMemberStatus asks member i of the shared etcd for its status over
// its JSON gateway.
func (c *Cluster) EtcdMemberStatus(ctx context.Context, i int) (EtcdStatus, error) {
	dial := DialerIn(c.Ctl.NS)
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr) },
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, EtcdMemberURL(i)+"/v3/maintenance/status", bytes.NewReader([]byte("{}")))
	if err != nil {
		return EtcdStatus{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return EtcdStatus{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return EtcdStatus{}, err
	}
	var st struct {
		Header struct {
			MemberID string `json:"member_id"`
		} `json:"header"`
		Leader string `json:"leader"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return EtcdStatus{}, fmt.Errorf("e2e: etcd member %d status: %w: %s", i, err, strings.TrimSpace(string(body)))
	}
	if st.Leader == "" {
		return EtcdStatus{}, fmt.Errorf("e2e: etcd member %d knows no leader: %s", i, strings.TrimSpace(string(body)))
	}
	return EtcdStatus{MemberID: st.Header.MemberID, Leader: st.Leader}, nil
}

// EtcdLeader returns the index of the shared etcd's leader member.
func (c *Cluster) EtcdLeader(ctx context.Context) (int, error) {
	for i := range c.etcd {
		if exited, _ := c.EtcdMember(i).Exited(); exited {
			continue
		}
		st, err := c.EtcdMemberStatus(ctx, i)
		if err != nil {
			continue
		}
		if st.MemberID == st.Leader {
			return i, nil
		}
	}
	return -1, errors.New("e2e: no etcd member says it leads")
}
