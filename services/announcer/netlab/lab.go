package netlab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// cmdTimeout bounds every short command the Lab runs (ip, sysctl, tc).
const cmdTimeout = 20 * time.Second

// Lab is one throwaway network: a bridge namespace, host namespaces joined to
// it, the processes running in them and a directory for their files. Close
// undoes all of it. A Lab is safe for concurrent use.
type Lab struct {
	id     string
	dir    string
	bridge string // bridge namespace
	logf   func(format string, args ...any)

	mu     sync.Mutex
	hosts  []*Host
	procs  []*Proc
	ports  int // veth ends made in the bridge namespace
	closed bool
}

// Host is one namespace joined to the Lab's bridge by its eth0.
type Host struct {
	lab   *Lab
	Role  string         // the name the test gave it, e.g. "router"
	NS    string         // the namespace's unique name
	Addrs []netip.Prefix // addresses on eth0
}

// New creates a Lab: its directory and its bridge namespace. logf, when not
// nil, receives a line per setup step worth knowing about (t.Logf fits).
func New(logf func(format string, args ...any)) (*Lab, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		return nil, fmt.Errorf("netlab: random suffix: %w", err)
	}
	id := fmt.Sprintf("nl%d-%s", os.Getpid(), hex.EncodeToString(suffix))
	dir, err := os.MkdirTemp("", id+"-")
	if err != nil {
		return nil, fmt.Errorf("netlab: temp dir: %w", err)
	}
	// FRR daemons drop to the frr user and must reach their files.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("netlab: chmod %s: %w", dir, err)
	}
	l := &Lab{id: id, dir: dir, bridge: id + "-sw", logf: logf}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	if err := l.setupBridge(ctx); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

func (l *Lab) setupBridge(ctx context.Context) error {
	if err := run(ctx, "ip", "netns", "add", l.bridge); err != nil {
		return err
	}
	steps := [][]string{
		{"ip", "netns", "exec", l.bridge, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1", "net.ipv6.conf.all.disable_ipv6=1"},
		{"ip", "-n", l.bridge, "link", "add", MainSegment, "type", "bridge"},
		{"ip", "-n", l.bridge, "link", "set", MainSegment, "up"},
		{"ip", "-n", l.bridge, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := run(ctx, s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// Dir is the Lab's directory: configurations, sockets and logs live there.
func (l *Lab) Dir() string { return l.dir }

// ID is the Lab's unique prefix, part of every namespace name.
func (l *Lab) ID() string { return l.id }

// MainSegment is the bridge every Lab starts with; AddHost joins hosts to it.
const MainSegment = "br0"

// AddSegment adds another L2 segment to the Lab: a bridge named name (at most
// 15 characters) in the bridge namespace, for a second network such as a
// management network that must stay up when a host's eth0 goes down.
func (l *Lab) AddSegment(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	if err := run(ctx, "ip", "-n", l.bridge, "link", "add", name, "type", "bridge"); err != nil {
		return err
	}
	return run(ctx, "ip", "-n", l.bridge, "link", "set", name, "up")
}

// AddHost creates a namespace for role, joins it to the main segment with a
// veth pair (eth0 on the host side) and puts addrs on eth0. IPv6 addresses
// are added with nodad and duplicate address detection is off in the
// namespace.
func (l *Lab) AddHost(ctx context.Context, role string, addrs ...netip.Prefix) (*Host, error) {
	return l.AddHostOn(ctx, role, MainSegment, addrs...)
}

// AddHostOn is AddHost with eth0 on segment instead of the main one.
func (l *Lab) AddHostOn(ctx context.Context, role, segment string, addrs ...netip.Prefix) (*Host, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errors.New("netlab: lab is closed")
	}
	h := &Host{lab: l, Role: role, NS: l.id + "-" + role, Addrs: addrs}
	for _, o := range l.hosts {
		if o.Role == role {
			l.mu.Unlock()
			return nil, fmt.Errorf("netlab: host %q already exists", role)
		}
	}
	l.hosts = append(l.hosts, h)
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	if err := run(ctx, "ip", "netns", "add", h.NS); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"ip", "netns", "exec", h.NS, "sysctl", "-qw",
			"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"},
		{"ip", "-n", h.NS, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := run(ctx, s[0], s[1:]...); err != nil {
			return nil, fmt.Errorf("netlab: host %s: %w", role, err)
		}
	}
	if err := h.attach(ctx, segment, "eth0", addrs); err != nil {
		return nil, err
	}
	return h, nil
}

// Attach joins the host to segment (see AddSegment) with a new interface
// ifname carrying addrs, as AddHost does for eth0. The addresses are not
// added to h.Addrs.
func (h *Host) Attach(ctx context.Context, segment, ifname string, addrs ...netip.Prefix) error {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	return h.attach(ctx, segment, ifname, addrs)
}

func (h *Host) attach(ctx context.Context, segment, ifname string, addrs []netip.Prefix) error {
	l := h.lab
	l.mu.Lock()
	port := fmt.Sprintf("p%d", l.ports)
	l.ports++
	l.mu.Unlock()
	steps := [][]string{
		{"ip", "link", "add", port, "netns", l.bridge, "type", "veth", "peer", "name", ifname, "netns", h.NS},
		{"ip", "-n", l.bridge, "link", "set", port, "master", segment, "up"},
	}
	for _, a := range addrs {
		s := []string{"ip", "-n", h.NS, "addr", "add", a.String(), "dev", ifname}
		if a.Addr().Is6() {
			s = append(s, "nodad")
		}
		steps = append(steps, s)
	}
	steps = append(steps, []string{"ip", "-n", h.NS, "link", "set", ifname, "up"})
	for _, s := range steps {
		if err := run(ctx, s[0], s[1:]...); err != nil {
			return fmt.Errorf("netlab: host %s: %w", h.Role, err)
		}
	}
	return nil
}

// Close stops every process the Lab started (by PID: SIGTERM, then SIGKILL
// after two seconds), deletes its namespaces and removes its directory. It
// is safe to call more than once.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	procs := append([]*Proc(nil), l.procs...)
	hosts := append([]*Host(nil), l.hosts...)
	l.mu.Unlock()

	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if !procs[i].Stop(2 * time.Second) {
			l.logf("netlab: %s (pid %d) ignored SIGTERM for 2s; killed", procs[i].Name, procs[i].PID)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	for i := len(hosts) - 1; i >= 0; i-- {
		if err := deleteNS(ctx, hosts[i].NS); err != nil {
			errs = append(errs, err)
		}
	}
	if err := deleteNS(ctx, l.bridge); err != nil {
		errs = append(errs, err)
	}
	if os.Getenv("NETLAB_KEEP_DIR") == "" {
		if err := os.RemoveAll(l.dir); err != nil {
			errs = append(errs, fmt.Errorf("netlab: remove %s: %w", l.dir, err))
		}
	} else {
		l.logf("netlab: kept %s", l.dir)
	}
	return errors.Join(errs...)
}

func deleteNS(ctx context.Context, ns string) error {
	if _, err := os.Stat(filepath.Join("/run/netns", ns)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return run(ctx, "ip", "netns", "del", ns)
}

// Procs lists the processes the Lab started, oldest first.
func (l *Lab) Procs() []*Proc {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Proc(nil), l.procs...)
}

// Lab returns the Lab the host belongs to.
func (h *Host) Lab() *Lab { return h.lab }

// Addr4 is the host's first IPv4 address (invalid when it has none).
func (h *Host) Addr4() netip.Addr {
	for _, a := range h.Addrs {
		if a.Addr().Is4() {
			return a.Addr()
		}
	}
	return netip.Addr{}
}

// Addr6 is the host's first IPv6 address (invalid when it has none).
func (h *Host) Addr6() netip.Addr {
	for _, a := range h.Addrs {
		if a.Addr().Is6() {
			return a.Addr()
		}
	}
	return netip.Addr{}
}

// Run runs a short command inside the host's namespace and returns its
// combined output. A non-zero exit is an error carrying the output.
func (h *Host) Run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	full := append([]string{"netns", "exec", h.NS, name}, args...)
	out, err := exec.CommandContext(ctx, "ip", full...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("netlab: %s in %s: %w: %s", strings.Join(append([]string{name}, args...), " "), h.Role, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// DropEgress makes the host silent without closing anything: every packet it
// sends on eth0 is dropped (a pfifo queue of length zero), as if it had died.
// RestoreEgress undoes it.
func (h *Host) DropEgress(ctx context.Context) error {
	_, err := h.Run(ctx, "tc", "qdisc", "add", "dev", "eth0", "root", "pfifo", "limit", "0")
	return err
}

// RestoreEgress removes the queue DropEgress added.
func (h *Host) RestoreEgress(ctx context.Context) error {
	_, err := h.Run(ctx, "tc", "qdisc", "del", "dev", "eth0", "root")
	return err
}

// Path returns a path inside the Lab's directory for the host's files.
func (h *Host) Path(name string) string {
	return filepath.Join(h.lab.dir, h.Role+"-"+name)
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netlab: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
