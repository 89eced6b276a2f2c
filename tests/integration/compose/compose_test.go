package compose

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// project is the compose project the test runs (its containers are
// project_service_1, its network project_lab).
const project = "beacon-lab-test"

// images are what the lab needs, built by `make images`.
var images = []string{"ipamd", "announcerd", "gatewayd", "beaconctl", "etcd", "lab"}

// lab drives the compose lab.
type lab struct {
	t   *testing.T
	ctx context.Context
	dir string // deploy/compose
	env []string
	// localAddrs: the nodes keep the addresses they answer for local
	// (--local-addresses-device), so the client's pings are answered.
	localAddrs bool
}

// network is the lab's network, made before `up` (compose.yaml).
const network = "beacon-lab"

// require skips unless BEACON_COMPOSE is set (make test-compose sets it,
// so that the lab runs once, after make images), and then fails when the lab
// cannot run here.
func require(t *testing.T, env []string) {
	t.Helper()
	if os.Getenv("BEACON_COMPOSE") == "" {
		t.Skipf("SKIPPING %s: the compose lab runs in `make test-compose` (BEACON_COMPOSE=1), after `make images`", t.Name())
	}
	miss := func(format string, a ...any) {
		t.Helper()
		t.Fatalf(format, a...)
	}
	if os.Geteuid() != 0 {
		miss("the compose lab needs root (podman with bridge networks and NET_ADMIN); make test-compose runs it as root in CI")
	}
	for _, p := range []string{"podman", "podman-compose"} {
		if _, err := exec.LookPath(p); err != nil {
			miss("%s is not installed; run `make images` as root", p)
		}
	}
	for _, i := range images {
		cmd := exec.Command("podman", "image", "exists", "localhost/beacon/"+i+":dev")
		cmd.Env = env
		if cmd.Run() != nil {
			miss("image localhost/beacon/%s:dev is missing; run `make images`", i)
		}
	}
}

func newLab(t *testing.T) *lab {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(wd, "..", "..", "..")
	env := append(os.Environ(), "CONTAINERS_CONF="+filepath.Join(root, "deploy", "images", "containers.conf"))
	require(t, env)
	// Without dummy devices in the kernel (this CI machine's has none) the
	// nodes cannot keep their addresses local: they still answer ARP and
	// advertise the route, but do not accept the traffic (README.md).
	l := &lab{t: t, dir: filepath.Join(root, "deploy", "compose"), env: env}
	if err := exec.Command("unshare", "--net", "ip", "link", "add", "probe0", "type", "dummy").Run(); err != nil {
		t.Logf("no dummy devices in this kernel (%v): the nodes run without --local-addresses-device, and the client checks ARP, not ping", err)
		l.env = append(l.env, "BEACON_LOCAL_DEVICE=")
	} else {
		l.localAddrs = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	l.ctx = ctx
	// Leftovers of an earlier run that did not finish.
	_, _ = l.compose("down", "-v")
	if _, err := l.podman("network", "exists", network); err != nil {
		if out, err := l.podman("network", "create", "--subnet", "198.51.100.0/24", "--ip-range", "198.51.100.128/25", network); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		t.Cleanup(func() {
			// After the lab's own cleanup, which ends l.ctx.
			cmd := exec.Command("podman", "network", "rm", network)
			cmd.Env = l.env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("podman network rm %s: %v\n%s", network, err, out)
			}
		})
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range []string{"ipamd-1", "ipamd-2", "node-1", "node-2", "router", "gateway", "certs"} {
				// Both streams: podman logs writes what the container wrote
				// to stderr (the services' JSON logs) to its own stderr.
				cmd := exec.CommandContext(l.ctx, "podman", "logs", "--tail", "40", container(s))
				cmd.Dir, cmd.Env = l.dir, l.env
				out, _ := cmd.CombinedOutput()
				t.Logf("---- %s ----\n%s", s, out)
			}
			// FRR's own view of its sessions and routes: its log holds only
			// watchfrr's start (the BFD flake of docs/operating.md).
			out, _ := l.exec("router", "vtysh", "-c", "show bgp summary", "-c", "show bfd peers brief",
				"-c", "show bgp ipv4 unicast", "-c", "show bgp ipv6 unicast")
			t.Logf("---- router: vtysh ----\n%s", out)
		}
		if out, err := l.compose("down", "-v"); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
		cancel()
	})
	return l
}

// container is the name compose gives a service's container.
func container(service string) string { return project + "_" + service + "_1" }

func (l *lab) run(name string, args ...string) (string, error) {
	cmd := exec.CommandContext(l.ctx, name, args...)
	cmd.Dir, cmd.Env = l.dir, l.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.String() + errOut.String(), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return out.String(), nil
}

func (l *lab) compose(args ...string) (string, error) {
	return l.run("podman-compose", append([]string{"-p", project, "-f", "compose.yaml"}, args...)...)
}

func (l *lab) podman(args ...string) (string, error) { return l.run("podman", args...) }

// beaconctl runs beaconctl in its service's container, as README.md does
// (podman-compose run --rm --no-deps beaconctl ...), and returns its
// standard output.
func (l *lab) beaconctl(args ...string) (string, error) {
	return l.compose(append([]string{"run", "--rm", "--no-deps", "beaconctl"}, args...)...)
}

// exec runs a command in a service's running container.
func (l *lab) exec(service string, args ...string) (string, error) {
	return l.podman(append([]string{"exec", container(service)}, args...)...)
}

// eventually polls f until it returns nil or timeout passes.
func (l *lab) eventually(what string, timeout time.Duration, f func() error) {
	l.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		select {
		case <-l.ctx.Done():
			l.t.Fatalf("%s: %v (last: %v)", what, l.ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// bgpPaths returns the next hops of FRR's paths to prefix.
func (l *lab) bgpPaths(prefix string) ([]string, error) {
	out, err := l.exec("router", "vtysh", "-c", "show bgp ipv4 unicast "+prefix+" json")
	if err != nil {
		return nil, err
	}
	var r struct {
		Paths []struct {
			Valid    bool `json:"valid"`
			Nexthops []struct {
				IP string `json:"ip"`
			} `json:"nexthops"`
		} `json:"paths"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return nil, fmt.Errorf("vtysh: %w: %s", err, out)
	}
	var hops []string
	for _, p := range r.Paths {
		if p.Valid && len(p.Nexthops) > 0 {
			hops = append(hops, p.Nexthops[0].IP)
		}
	}
	return hops, nil
}

// mac returns the MAC address of a service's container on the lab network.
func (l *lab) mac(service string) string {
	l.t.Helper()
	return l.inspect(service, "{{range .NetworkSettings.Networks}}{{.MacAddress}}{{end}}")
}

// ip returns the IPv4 address of a service's container on the lab network.
func (l *lab) ip(service string) string {
	l.t.Helper()
	return l.inspect(service, "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")
}

func (l *lab) inspect(service, format string) string {
	l.t.Helper()
	out, err := l.podman("inspect", container(service), "--format", format)
	if err != nil {
		l.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// owner returns the MAC address that answers the client's ARP requests for
// addr and, when the nodes keep their addresses local, checks that addr
// answers the client's ping.
func (l *lab) owner(addr string) (string, error) {
	out, err := l.exec("client", "arping", "-c", "1", "-w", "2", "-I", "eth0", addr)
	if err != nil {
		return "", fmt.Errorf("no ARP answer for %s: %w: %s", addr, err, out)
	}
	i, j := strings.Index(out, "["), strings.Index(out, "]")
	if i < 0 || j < i {
		return "", fmt.Errorf("arping: %s", out)
	}
	mac := strings.ToLower(out[i+1 : j])
	if l.localAddrs {
		if out, err := l.exec("client", "ping", "-c", "1", "-W", "1", addr); err != nil {
			return "", fmt.Errorf("%w: %s", err, out)
		}
	}
	return mac, nil
}

// checkGateway lists the pools through the gateway on 127.0.0.1:8443, as
// README.md's console step does: a token from beaconctl, the CA from the
// certs volume.
func (l *lab) checkGateway() {
	l.t.Helper()
	out, err := l.beaconctl("token", "create", "walkthrough", "--role", "admin", "-o", "json")
	if err != nil {
		l.t.Fatalf("%v\n%s", err, out)
	}
	var tok struct {
		Secret string `json:"secret"`
	}
	i := strings.Index(out, "\n{")
	if i < 0 {
		l.t.Fatalf("token create: no JSON object in %s", out)
	}
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&tok); err != nil || tok.Secret == "" {
		l.t.Fatalf("token create: %v: %s", err, out)
	}
	ca, err := l.podman("run", "--rm", "-v", project+"_certs:/c:ro", "localhost/beacon/lab:dev", "cat", "/c/gateway-tls/ca.crt")
	if err != nil {
		l.t.Fatalf("%v\n%s", err, ca)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(ca)) {
		l.t.Fatalf("no CA certificate in %q", ca)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	defer hc.CloseIdleConnections()
	l.eventually("the gateway listing the pools", time.Minute, func() error {
		req, err := http.NewRequestWithContext(l.ctx, http.MethodGet, "https://127.0.0.1:8443/v1/pools", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok.Secret)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "pools/web") {
			return fmt.Errorf("%s: %s", resp.Status, body)
		}
		return nil
	})
}

func TestComposeWalkthrough(t *testing.T) {
	l := newLab(t)
	start := time.Now()
	if out, err := l.compose("up", "-d"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// The IPAM answers once etcd has a quorum and the certificates exist.
	l.eventually("ipamd answering beaconctl", 3*time.Minute, func() error {
		_, err := l.beaconctl("pool", "list")
		return err
	})
	t.Logf("lab up in %v", time.Since(start).Round(time.Second))

	// The walk-through of README.md.
	for _, args := range [][]string{
		{"pool", "create", "web", "--range", "203.0.113.0/28"},
		{"bfd", "create", "fast", "--tenant", "lab", "--receive-interval", "300ms", "--transmit-interval", "300ms", "--detect-multiplier", "3"},
		{"peer", "create", "router", "--tenant", "lab", "--my-asn", "64500", "--peer-asn", "64501", "--peer-address", "198.51.100.10", "--bfd-profile", "fast"},
		{"bgpadv", "create", "web", "--tenant", "lab", "--pool", "web", "--peer", "router"},
		{"l2adv", "create", "web", "--tenant", "lab", "--pool", "web", "--interface", "eth0"},
	} {
		if out, err := l.beaconctl(args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	out, err := l.beaconctl("alloc", "allocate", "default/web", "--tenant", "lab", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var alloc struct {
		Addresses []string `json:"addresses"`
	}
	// podman-compose prints what it runs around beaconctl's output: the
	// JSON object is the one starting a line.
	i := strings.Index(out, "\n{")
	if i < 0 {
		t.Fatalf("allocate: no JSON object in %s", out)
	}
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&alloc); err != nil || len(alloc.Addresses) == 0 {
		t.Fatalf("allocate: %v: %s", err, out)
	}
	addr := strings.TrimSuffix(strings.TrimSuffix(alloc.Addresses[0], "/32"), "/128")
	t.Logf("allocated %s", addr)

	// FRR has the route from both nodes (ECMP), with BFD up.
	l.eventually("FRR's route from both nodes", 2*time.Minute, func() error {
		hops, err := l.bgpPaths(addr + "/32")
		if err != nil {
			return err
		}
		if len(hops) != 2 {
			return fmt.Errorf("paths via %v", hops)
		}
		return nil
	})
	l.eventually("BFD up with both nodes", time.Minute, func() error {
		out, err := l.exec("router", "vtysh", "-c", "show bfd peers brief")
		if err != nil {
			return err
		}
		if n := strings.Count(out, " up "); n < 2 {
			return fmt.Errorf("%d sessions up:\n%s", n, out)
		}
		return nil
	})

	// The gateway (REST, the console's API) on the published loopback
	// port, verified with the lab's CA, with a token beaconctl issued.
	l.checkGateway()

	// The client reaches the address on its segment; one node answers.
	macs := map[string]string{l.mac("node-1"): "node-1", l.mac("node-2"): "node-2"}
	var first string
	l.eventually("the client reaching "+addr, time.Minute, func() error {
		m, err := l.owner(addr)
		if err != nil {
			return err
		}
		if macs[m] == "" {
			return fmt.Errorf("answered by %s, not a node (%v)", m, macs)
		}
		first = macs[m]
		return nil
	})
	t.Logf("%s answers for %s", first, addr)

	// Kill that node's announcer: the address moves to the other node.
	killed := time.Now()
	if out, err := l.podman("kill", container(first)); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	l.eventually("the address moving off "+first, 2*time.Minute, func() error {
		m, err := l.owner(addr)
		if err != nil {
			return err
		}
		if macs[m] == first || macs[m] == "" {
			return fmt.Errorf("still answered by %s", m)
		}
		return nil
	})
	t.Logf("%s moved off %s in %v", addr, first, time.Since(killed).Round(100*time.Millisecond))
	// And FRR has dropped the dead node's path (BFD, or the session's
	// end), keeping the other's.
	other := map[string]string{"node-1": "node-2", "node-2": "node-1"}[first]
	want := l.ip(other)
	l.eventually("FRR's route via "+other+" only", time.Minute, func() error {
		hops, err := l.bgpPaths(addr + "/32")
		if err != nil {
			return err
		}
		if len(hops) != 1 || hops[0] != want {
			return fmt.Errorf("paths via %v, want only %s", hops, want)
		}
		return nil
	})
	t.Logf("FRR's path via %s gone %v after the kill", first, time.Since(killed).Round(100*time.Millisecond))
}
