// Package l2lab is test support for package l2 and for benchmarks built on
// it: a small layer 2 network made of network namespaces (a bridge, two
// nodes and a client joined by veth pairs), responders run as helper
// processes inside the node namespaces, the real clients (arping, ndisc6,
// ping) run inside the client namespace, and the client kernel's neighbour
// table read over netlink. Only tests import it.
//
// A test binary that uses it must call RunHelperIfAsked first thing in its
// TestMain: the responders are that same binary, re-executed inside a node
// namespace with `ip netns exec`. A process, unlike a goroutine, lives in
// one namespace for good (every socket it opens, whenever it opens it, is
// in the node's namespace), and it can be SIGKILLed like a real announcer.
//
// All traffic stays inside the namespaces a Lab creates, on documentation
// prefixes (192.0.2.0/24, 198.51.100.0/24, 2001:db8::/32). Namespaces have
// unique names and are deleted, and helpers killed by PID, in t.Cleanup.
package l2lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Interface names inside the node and client namespaces.
const (
	// LAN is on bridge A: node1, node2 and the client.
	LAN = "eth0"
	// LAN2 is on bridge B: node1 and the client only. Node1's LAN2 has no
	// address of its own (only an automatic link-local one), to show that
	// the responder needs none.
	LAN2 = "eth1"
)

// Lab is one topology:
//
//	node1 eth0 ─┐            ┌─ eth0 client
//	node2 eth0 ─┼─ br0 ──────┘
//	node1 eth1 ─── br1 ─────── eth1 client
//
// with node1 192.0.2.1 / 2001:db8::1, node2 192.0.2.2 / 2001:db8::2 and the
// client 192.0.2.10 / 2001:db8::10 on eth0, and the client 198.51.100.10 /
// 2001:db8:1::10 on eth1. The service addresses (VIP4, VIP6 on eth0's
// subnets; VIP4B, VIP6B on eth1's) are configured nowhere.
type Lab struct {
	t testing.TB

	// Namespace names.
	Bridge, Node1, Node2, Client string

	VIP4, VIP6, VIP4B, VIP6B netip.Addr

	mu      sync.Mutex
	handles map[string]*netlink.Handle
}

// Require skips the test, loudly, unless it runs as root with the binaries
// the lab uses.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: l2lab needs root (network namespaces, AF_PACKET); CI runs these tests as root")
	}
	for _, bin := range []string{"ip", "arping", "ndisc6", "ping"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("SKIPPING: %s not installed (Debian: iproute2 iputils-arping ndisc6 iputils-ping): %v", bin, err)
		}
	}
}

// New builds a Lab, skipping the test when Require does. Everything it
// creates is removed in t.Cleanup.
func New(t testing.TB) *Lab {
	t.Helper()
	Require(t)
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("l2lab-%d-%s-", os.Getpid(), hex.EncodeToString(b[:]))
	l := &Lab{
		t:       t,
		Bridge:  prefix + "br",
		Node1:   prefix + "node1",
		Node2:   prefix + "node2",
		Client:  prefix + "client",
		VIP4:    netip.MustParseAddr("192.0.2.100"),
		VIP6:    netip.MustParseAddr("2001:db8::100"),
		VIP4B:   netip.MustParseAddr("198.51.100.100"),
		VIP6B:   netip.MustParseAddr("2001:db8:1::100"),
		handles: make(map[string]*netlink.Handle),
	}
	t.Cleanup(l.destroy)
	if err := l.build(); err != nil {
		t.Fatalf("build lab: %v", err)
	}
	return l
}

func (l *Lab) namespaces() []string { return []string{l.Client, l.Node1, l.Node2, l.Bridge} }

func (l *Lab) build() error {
	var cmds [][]string
	for _, ns := range l.namespaces() {
		cmds = append(cmds,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
			// Link-local addresses usable at once (no tentative state).
			[]string{"ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"},
		)
	}
	for _, br := range []string{"br0", "br1"} {
		// No MLD snooping: no querier here, and the test bridge should
		// behave like a plain switch.
		cmds = append(cmds,
			[]string{"ip", "-n", l.Bridge, "link", "add", br, "type", "bridge", "mcast_snooping", "0"},
			[]string{"ip", "-n", l.Bridge, "link", "set", br, "up"})
	}
	for _, p := range l.ports() {
		cmds = append(cmds, l.plugCmds(p)...)
	}
	addrs := []struct{ ns, dev, addr string }{
		{l.Node1, LAN, "192.0.2.1/24"}, {l.Node1, LAN, "2001:db8::1/64"},
		{l.Node2, LAN, "192.0.2.2/24"}, {l.Node2, LAN, "2001:db8::2/64"},
		{l.Client, LAN, "192.0.2.10/24"}, {l.Client, LAN, "2001:db8::10/64"},
		{l.Client, LAN2, "198.51.100.10/24"}, {l.Client, LAN2, "2001:db8:1::10/64"},
	}
	for _, a := range addrs {
		c := []string{"ip", "-n", a.ns, "addr", "add", a.addr, "dev", a.dev}
		if strings.Contains(a.addr, ":") {
			c = append(c, "nodad")
		}
		cmds = append(cmds, c)
	}
	for _, c := range cmds {
		if _, err := run(context.Background(), c...); err != nil {
			return err
		}
	}
	return nil
}

// port is one veth pair: dev in ns, peer on a bridge in the bridge namespace.
type port struct{ ns, dev, peer, bridge string }

func (l *Lab) ports() []port {
	return []port{
		{l.Node1, LAN, "n1a", "br0"},
		{l.Node1, LAN2, "n1b", "br1"},
		{l.Node2, LAN, "n2a", "br0"},
		{l.Client, LAN, "cla", "br0"},
		{l.Client, LAN2, "clb", "br1"},
	}
}

func (l *Lab) plugCmds(p port) [][]string {
	return [][]string{
		{"ip", "link", "add", p.peer, "netns", l.Bridge, "type", "veth", "peer", "name", p.dev, "netns", p.ns},
		{"ip", "-n", l.Bridge, "link", "set", p.peer, "master", p.bridge, "up"},
		{"ip", "-n", p.ns, "link", "set", p.dev, "up"},
	}
}

// ReplaceNode1LAN2 deletes node1's eth1 veth pair and creates a new one with
// the same names (a new ifindex and MAC), as when an interface vanishes and
// comes back.
func (l *Lab) ReplaceNode1LAN2(ctx context.Context) error {
	if _, err := l.Exec(ctx, l.Node1, "ip", "link", "del", LAN2); err != nil {
		return err
	}
	for _, p := range l.ports() {
		if p.ns == l.Node1 && p.dev == LAN2 {
			for _, c := range l.plugCmds(p) {
				if _, err := run(ctx, c...); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (l *Lab) destroy() {
	l.mu.Lock()
	for _, h := range l.handles {
		h.Close()
	}
	l.handles = nil
	l.mu.Unlock()
	for _, ns := range l.namespaces() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil &&
			!bytes.Contains(out, []byte("No such file")) {
			l.t.Errorf("delete namespace %s: %v: %s", ns, err, out)
		}
	}
}

func run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// Exec runs a command inside namespace ns and returns its combined output.
func (l *Lab) Exec(ctx context.Context, ns string, args ...string) (string, error) {
	return run(ctx, append([]string{"ip", "netns", "exec", ns}, args...)...)
}

// Sysctl sets sysctls (key=value) inside namespace ns.
func (l *Lab) Sysctl(ctx context.Context, ns string, kv ...string) error {
	_, err := l.Exec(ctx, ns, append([]string{"sysctl", "-qw"}, kv...)...)
	return err
}

// handle returns a netlink handle in namespace ns.
func (l *Lab) handle(ns string) (*netlink.Handle, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h, ok := l.handles[ns]; ok {
		return h, nil
	}
	nsh, err := netns.GetFromName(ns)
	if err != nil {
		return nil, fmt.Errorf("open namespace %s: %w", ns, err)
	}
	defer func() { _ = nsh.Close() }()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", ns, err)
	}
	l.handles[ns] = h
	return h, nil
}

// MAC returns the hardware address of dev in namespace ns.
func (l *Lab) MAC(ns, dev string) (net.HardwareAddr, error) {
	h, err := l.handle(ns)
	if err != nil {
		return nil, err
	}
	lk, err := h.LinkByName(dev)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", dev, ns, err)
	}
	return lk.Attrs().HardwareAddr, nil
}

// MustMAC is MAC, failing the test on error.
func (l *Lab) MustMAC(ns, dev string) net.HardwareAddr {
	l.t.Helper()
	mac, err := l.MAC(ns, dev)
	if err != nil {
		l.t.Fatal(err)
	}
	return mac
}

// Neighbour is one entry of the client's neighbour table.
type Neighbour struct {
	MAC   net.HardwareAddr
	State string // as ip neigh prints it: REACHABLE, STALE, FAILED, ...
}

// ErrNoNeighbour is returned by Neigh when the table has no entry.
var ErrNoNeighbour = errors.New("l2lab: no neighbour entry")

// Neigh reads the client's neighbour entry for addr on dev.
func (l *Lab) Neigh(dev string, addr netip.Addr) (Neighbour, error) {
	h, err := l.handle(l.Client)
	if err != nil {
		return Neighbour{}, err
	}
	lk, err := h.LinkByName(dev)
	if err != nil {
		return Neighbour{}, fmt.Errorf("%s in client: %w", dev, err)
	}
	family := netlink.FAMILY_V4
	if addr.Is6() {
		family = netlink.FAMILY_V6
	}
	neighs, err := h.NeighList(lk.Attrs().Index, family)
	if err != nil {
		return Neighbour{}, fmt.Errorf("neighbours in client: %w", err)
	}
	for _, n := range neighs {
		if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == addr {
			return Neighbour{MAC: n.HardwareAddr, State: StateName(n.State)}, nil
		}
	}
	return Neighbour{}, fmt.Errorf("%s on %s: %w", addr, dev, ErrNoNeighbour)
}

// StateName spells a NUD state as ip neigh does.
func StateName(s int) string {
	names := []struct {
		bit  int
		name string
	}{
		{netlink.NUD_INCOMPLETE, "INCOMPLETE"}, {netlink.NUD_REACHABLE, "REACHABLE"},
		{netlink.NUD_STALE, "STALE"}, {netlink.NUD_DELAY, "DELAY"}, {netlink.NUD_PROBE, "PROBE"},
		{netlink.NUD_FAILED, "FAILED"}, {netlink.NUD_NOARP, "NOARP"}, {netlink.NUD_PERMANENT, "PERMANENT"},
	}
	var out []string
	for _, n := range names {
		if s&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	if len(out) == 0 {
		return "NONE"
	}
	return strings.Join(out, "|")
}

// WaitNeigh polls the client's entry for addr on dev until it has mac, or
// the deadline passes.
func (l *Lab) WaitNeigh(ctx context.Context, dev string, addr netip.Addr, mac net.HardwareAddr, within time.Duration) (Neighbour, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		n, err := l.Neigh(dev, addr)
		if err == nil && bytes.Equal(n.MAC, mac) {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return n, fmt.Errorf("client's entry for %s is %v, want %s: %w", addr, n.MAC, mac, errors.Join(ctx.Err(), err))
		case <-time.After(5 * time.Millisecond):
		}
	}
}
