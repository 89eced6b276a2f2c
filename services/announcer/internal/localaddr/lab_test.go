package localaddr_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/beaconlb/beacon/pkg/testwait"
	"github.com/beaconlb/beacon/services/announcer/internal/l2"
	"github.com/beaconlb/beacon/services/announcer/internal/l2/l2lab"
	"github.com/beaconlb/beacon/services/announcer/internal/localaddr"
	"github.com/beaconlb/beacon/services/announcer/internal/reconcile"
)

// refuseEnv makes TestRunRefuses run (inside a lab namespace).
const refuseEnv = "LOCALADDR_REFUSE_IN_LAB"

// nodeEnv names the device of a node helper started by startNode;
// kindsEnv holds its Options.AlsoKinds, comma-separated.
const (
	nodeEnv  = "LOCALADDR_NODE_HELPER_DEVICE"
	kindsEnv = "LOCALADDR_NODE_HELPER_ALSO_KINDS"
)

func TestMain(m *testing.M) {
	if dev := os.Getenv(nodeEnv); dev != "" {
		os.Exit(nodeMain(dev, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// nodeMain is a bare-metal announcer's L2 side, run inside a node
// namespace: an l2.Responder and a localaddr.Device, both running, fed by
// lines on stdin. "set JSON" hands the desired set to both, in the order
// announcerd does (reconcile.Responders); "local JSON" to the device only;
// "stop" ends both Runs and answers "stopped" or "err TEXT". Every other
// command answers "ok" or "err TEXT".
func nodeMain(dev string, in io.Reader, out, logw io.Writer) int {
	logger := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	responder := l2.New(logger, l2.Options{})
	var opts localaddr.Options
	if k := os.Getenv(kindsEnv); k != "" {
		opts.AlsoKinds = strings.Split(k, ",")
	}
	device := localaddr.New(dev, logger, opts)
	both := reconcile.Responders{device, responder}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 2)
	go func() { errs <- responder.Run(ctx) }()
	go func() { errs <- device.Run(ctx) }()
	stop := func() error {
		cancel()
		return errors.Join(<-errs, <-errs)
	}
	fmt.Fprintln(out, "ready")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		verb, arg, _ := strings.Cut(sc.Text(), " ")
		var desired map[string][]netip.Addr
		if arg != "" {
			if err := json.Unmarshal([]byte(arg), &desired); err != nil {
				fmt.Fprintf(out, "err %v\n", err)
				continue
			}
		}
		var err error
		switch verb {
		case "set":
			err = both.Set(desired)
		case "local":
			err = device.Set(desired)
		case "stop":
			if err := stop(); err != nil {
				fmt.Fprintf(out, "err %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
				return 1
			}
			fmt.Fprintln(out, "stopped")
			return 0
		default:
			err = fmt.Errorf("unknown command %q", verb)
		}
		if err != nil {
			fmt.Fprintf(out, "err %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
			continue
		}
		fmt.Fprintln(out, "ok")
	}
	if err := stop(); err != nil {
		logger.Error("stop", "error", err)
		return 1
	}
	return 0
}

// node is a nodeMain process in a namespace.
type node struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{}
}

func startNode(t *testing.T, ns, dev, alsoKind string) *node {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), nodeEnv+"="+dev, kindsEnv+"="+alsoKind)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 8), done: make(chan struct{})}
	var pipes sync.WaitGroup
	pipes.Go(func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Logf("[node pid %d] %s", cmd.Process.Pid, sc.Text())
		}
	})
	pipes.Go(func() {
		defer close(n.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			n.lines <- sc.Text()
		}
	})
	go func() {
		pipes.Wait()
		_ = cmd.Wait()
		close(n.done)
	}()
	t.Cleanup(func() {
		select {
		case <-n.done:
		default:
			_ = cmd.Process.Kill() // by PID
			<-n.done
		}
	})
	if line := n.read(); line != "ready" {
		t.Fatalf("node helper said %q, want ready", line)
	}
	return n
}

func (n *node) read() string {
	n.t.Helper()
	select {
	case line, ok := <-n.lines:
		if !ok {
			n.t.Fatal("node helper exited")
		}
		return line
	case <-time.After(30 * time.Second):
		n.t.Fatal("node helper: no answer in 30s")
	}
	return ""
}

// call sends verb with desired and fails the test unless the answer is want.
func (n *node) call(verb string, desired map[string][]netip.Addr, want string) {
	n.t.Helper()
	line := verb
	if desired != nil {
		b, err := json.Marshal(desired)
		if err != nil {
			n.t.Fatal(err)
		}
		line += " " + string(b)
	}
	if _, err := io.WriteString(n.stdin, line+"\n"); err != nil {
		n.t.Fatal(err)
	}
	if got := n.read(); got != want {
		n.t.Fatalf("%s: node helper answered %q, want %q", verb, got, want)
	}
}

// devAddrs returns dev's addresses in namespace ns, IPv6 link-local ones
// left out, sorted; exists is false when there is no such device.
func devAddrs(t *testing.T, ns, dev string) (addrs []netip.Addr, exists bool) {
	t.Helper()
	nsh, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = nsh.Close() }()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	link, err := h.LinkByName(dev)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	list, err := h.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range list {
		ip, _ := netip.AddrFromSlice(a.IP)
		if ip = ip.Unmap(); ip.Is6() && ip.IsLinkLocalUnicast() {
			continue
		}
		if ones, bits := a.Mask.Size(); ones != bits && dev != l2lab.LAN {
			t.Errorf("%s on %s is /%d, want a host address", ip, dev, ones)
		}
		addrs = append(addrs, ip)
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	return addrs, true
}

// waitAddrs waits until dev in ns has exactly want (nil want and exists
// false: until the device is gone).
func waitAddrs(t *testing.T, ns, dev string, want []netip.Addr, exists bool) {
	t.Helper()
	testwait.For(t, 30*time.Second, dev+" in "+ns, func() error {
		got, ok := devAddrs(t, ns, dev)
		if ok != exists || !cmp.Equal(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
			return fmt.Errorf("exists %v with %v, want exists %v with %v", ok, got, exists, want)
		}
		return nil
	})
}

// inNamespace runs fn on an OS thread switched into namespace ns; sockets
// fn creates stay in ns.
func inNamespace(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		target, err := netns.GetFromName(ns)
		if err != nil {
			errc <- err
			return
		}
		defer func() { _ = target.Close() }()
		if err := netns.Set(target); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// serve listens on addr:0 in namespace ns and answers every connection
// with "beacon\n"; it returns the bound address.
func serve(t *testing.T, ns string, addr netip.Addr) netip.AddrPort {
	t.Helper()
	var ln net.Listener
	err := inNamespace(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
		return err
	})
	if err != nil {
		t.Fatalf("listen on %s in the node: %v", addr, err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "beacon\n")
			_ = c.Close()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

// fetch connects to ap from namespace ns and returns what it reads.
func fetch(ns string, ap netip.AddrPort) (string, error) {
	var c net.Conn
	err := inNamespace(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp", ap.String(), 5*time.Second)
		return err
	})
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

func sysctl(t *testing.T, lab *l2lab.Lab, ns, key string) string {
	t.Helper()
	out, err := lab.Exec(t.Context(), ns, "sysctl", "-n", key)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// TestBareMetalNode runs the announcer's L2 side with a local-addresses
// device in a node namespace and checks, from a client namespace on the
// same segment, that the client reaches a TCP listener on the service
// addresses, that only the responder (never the node's kernel) answers ARP
// and neighbor solicitations for them, and that the addresses leave the
// device with the plan, at shutdown, and (as leftovers) at start.
func TestBareMetalNode(t *testing.T) {
	lab := l2lab.New(t) // skips, loudly, without root or the clients
	ctx := t.Context()
	const dev = "beacon0"
	vip4, vip6 := lab.VIP4, lab.VIP6
	both := []netip.Addr{vip4, vip6}
	node1MAC := lab.MustMAC(lab.Node1, l2lab.LAN)

	// The device kind: a dummy, or on a kernel built without the dummy
	// driver a bridge with no ports, which holds local addresses the same
	// way.
	kind, alsoKind := "dummy", ""
	if out, err := lab.Exec(ctx, lab.Node2, "ip", "link", "add", "probe0", "type", "dummy"); err != nil {
		if !strings.Contains(out+err.Error(), "Unknown device type") {
			t.Fatal(err)
		}
		t.Log("NOTE: this kernel has no dummy driver (CONFIG_DUMMY): the local-addresses device is a bridge with no ports here, and creating the device is not tested")
		kind, alsoKind = "bridge", "bridge"
	} else if _, err := lab.Exec(ctx, lab.Node2, "ip", "link", "del", "probe0"); err != nil {
		t.Fatal(err)
	}

	// Control: with the defaults (arp_ignore 0), a kernel does answer ARP
	// for an address on such a device, and the test sees it.
	ctlAddr := netip.MustParseAddr("192.0.2.150")
	for _, c := range [][]string{
		{"ip", "link", "add", "ctl0", "type", kind}, {"ip", "link", "set", "ctl0", "up"},
		{"ip", "addr", "add", ctlAddr.String() + "/32", "dev", "ctl0"},
	} {
		if _, err := lab.Exec(ctx, lab.Node2, c...); err != nil {
			t.Fatal(err)
		}
	}
	macs, err := lab.Arping(ctx, l2lab.LAN, ctlAddr, 1, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(macs) == 0 {
		t.Fatal("control: node2's kernel did not answer ARP for an address on its dummy device; the checks below would prove nothing")
	}

	// A leftover of an announcer that crashed: the device with an address.
	stale := netip.MustParseAddr("192.0.2.99")
	for _, c := range [][]string{
		{"ip", "link", "add", dev, "type", kind},
		{"ip", "addr", "add", stale.String() + "/32", "dev", dev},
	} {
		if _, err := lab.Exec(ctx, lab.Node1, c...); err != nil {
			t.Fatal(err)
		}
	}

	n := startNode(t, lab.Node1, dev, alsoKind)
	waitAddrs(t, lab.Node1, dev, nil, true) // the leftover is gone
	for key, want := range map[string]string{"net.ipv4.conf.all.arp_ignore": "1", "net.ipv4.conf.all.arp_announce": "2"} {
		if got := sysctl(t, lab, lab.Node1, key); got != want {
			t.Errorf("%s = %s in the node, want %s", key, got, want)
		}
	}

	// The addresses local but the responder silent: nothing answers.
	n.call("local", map[string][]netip.Addr{l2lab.LAN: both}, "ok")
	waitAddrs(t, lab.Node1, dev, both, true)
	if macs, err := lab.Arping(ctx, l2lab.LAN, vip4, 2, 2*time.Second); err != nil || len(macs) != 0 {
		t.Errorf("ARP for %s with only the local address: replies %v (%v), want none: the node's kernel answers", vip4, macs, err)
	}
	if mac, err := lab.Ndisc6(ctx, l2lab.LAN, vip6, 2, 500*time.Millisecond); err != nil || mac != nil {
		t.Errorf("NS for %s with only the local address: answer %v (%v), want none: the node's kernel answers", vip6, mac, err)
	}

	// As announcerd does it: the device and the responder together.
	n.call("set", map[string][]netip.Addr{l2lab.LAN: both}, "ok")
	macs, err = lab.Arping(ctx, l2lab.LAN, vip4, 1, 2*time.Second)
	if err != nil || len(macs) == 0 {
		t.Fatalf("ARP for %s: replies %v (%v), want the responder's", vip4, macs, err)
	}
	for _, m := range macs {
		if m.String() != node1MAC.String() {
			t.Errorf("ARP reply for %s from %s, want node1's %s", vip4, m, node1MAC)
		}
	}
	for _, a := range both {
		ap := serve(t, lab.Node1, a) // binding proves the address is local
		got, err := fetch(lab.Client, ap)
		if err != nil || got != "beacon\n" {
			t.Errorf("client to %s: %q, %v; want \"beacon\\n\"", ap, got, err)
		}
	}

	// The plan drops IPv6, then everything: the addresses go at once.
	n.call("set", map[string][]netip.Addr{l2lab.LAN: {vip4}}, "ok")
	if got, _ := devAddrs(t, lab.Node1, dev); !slices.Equal(got, []netip.Addr{vip4}) {
		t.Errorf("after dropping %s the device has %v, want [%s]", vip6, got, vip4)
	}
	n.call("set", map[string][]netip.Addr{}, "ok")
	if got, _ := devAddrs(t, lab.Node1, dev); len(got) != 0 {
		t.Errorf("after dropping everything the device has %v", got)
	}

	// Shutdown removes what is there; the device existed before, so it
	// stays.
	n.call("set", map[string][]netip.Addr{l2lab.LAN: {vip4}, l2lab.LAN2: {lab.VIP4B}}, "ok")
	waitAddrs(t, lab.Node1, dev, []netip.Addr{vip4, lab.VIP4B}, true)
	n.call("stop", nil, "stopped")
	waitAddrs(t, lab.Node1, dev, nil, true)

	// A device Run created is deleted at shutdown.
	if kind != "dummy" {
		return
	}
	n2 := startNode(t, lab.Node2, "beacon1", "")
	n2.call("set", map[string][]netip.Addr{l2lab.LAN: {vip4}}, "ok")
	waitAddrs(t, lab.Node2, "beacon1", []netip.Addr{vip4}, true)
	n2.call("stop", nil, "stopped")
	waitAddrs(t, lab.Node2, "beacon1", nil, false)
}

func TestRefusesOtherDevices(t *testing.T) {
	lab := l2lab.New(t)
	// eth0 exists and is a veth: Run must refuse it, not empty it.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := lab.Exec(t.Context(), lab.Node1, "env", refuseEnv+"=1", exe, "-test.run=^TestRunRefuses$", "-test.v")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "--- PASS: TestRunRefuses") {
		t.Fatalf("no PASS from the run inside the node:\n%s", out)
	}
	if got, _ := devAddrs(t, lab.Node1, l2lab.LAN); !slices.Contains(got, netip.MustParseAddr("192.0.2.1")) {
		t.Errorf("eth0 lost its address: %v", got)
	}
}

// TestRunRefuses runs inside a node namespace (see TestRefusesOtherDevices).
func TestRunRefuses(t *testing.T) {
	if os.Getenv(refuseEnv) == "" {
		t.Skip("runs inside a lab namespace only, started by TestRefusesOtherDevices")
	}
	d := localaddr.New(l2lab.LAN, slog.New(slog.DiscardHandler), localaddr.Options{AlsoKinds: []string{"bridge"}})
	if err := d.Run(t.Context()); !errors.Is(err, localaddr.ErrNotDummy) {
		t.Errorf("Run on a veth = %v, want ErrNotDummy", err)
	}
}
