package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The real L2 clients, run in the client namespace on its eth0.

var (
	// iputils arping: "Unicast reply from 192.0.2.200 [02:AA:...]  0.6ms".
	arpingReply = regexp.MustCompile(`reply from (\S+) \[([0-9A-Fa-f:]{17})\]`)
	// ndisc6: "Target link-layer address: 02:AA:...".
	ndiscReply = regexp.MustCompile(`Target link-layer address: ([0-9A-Fa-f:]{17})`)
)

// Arping sends count ARP requests for addr from the client with arping (one
// a second) and returns the MAC of every reply; none is not an error.
func (c *Cluster) Arping(ctx context.Context, addr netip.Addr, count int) ([]net.HardwareAddr, error) {
	out, err := c.Client.Run(ctx, "arping", "-I", "eth0", "-c", strconv.Itoa(count), addr.String())
	// arping exits 1 when nothing answered; only a run that sent its
	// probes prints "Sent N probes".
	if !strings.Contains(out, "Sent ") {
		return nil, fmt.Errorf("arping: %w:\n%s", err, out)
	}
	var macs []net.HardwareAddr
	for _, m := range arpingReply.FindAllStringSubmatch(out, -1) {
		if m[1] != addr.String() {
			return nil, fmt.Errorf("arping: reply from %s, asked for %s:\n%s", m[1], addr, out)
		}
		mac, err := net.ParseMAC(m[2])
		if err != nil {
			return nil, fmt.Errorf("arping: %w", err)
		}
		macs = append(macs, mac)
	}
	return macs, nil
}

// Ndisc6 solicits addr from the client with ndisc6 and returns the MAC
// advertised, or nil when nothing answered.
func (c *Cluster) Ndisc6(ctx context.Context, addr netip.Addr) (net.HardwareAddr, error) {
	out, err := c.Client.Run(ctx, "ndisc6", "-1", "-n", "-r", "3", "-w", "500", addr.String(), "eth0")
	if m := ndiscReply.FindStringSubmatch(out); m != nil {
		return net.ParseMAC(m[1])
	}
	if strings.Contains(out, "No response.") {
		return nil, nil
	}
	if err == nil {
		err = errors.New("neither an answer nor a time-out")
	}
	return nil, fmt.Errorf("ndisc6: %w:\n%s", err, out)
}

// Ping sends one echo request from the client to addr, which makes the
// client's kernel resolve addr. Nothing answers the echo itself, so the
// result is ignored.
func (c *Cluster) Ping(ctx context.Context, addr netip.Addr) {
	args := []string{"-c", "1", "-W", "1", "-I", "eth0", addr.String()}
	if addr.Is6() {
		args = append([]string{"-6"}, args...)
	}
	_, _ = c.Client.Run(ctx, "ping", args...)
}

// Neighbour is the client kernel's neighbour entry for an address.
type Neighbour struct {
	MAC   net.HardwareAddr
	State string // "REACHABLE", "STALE", ...; "" when there is no entry
}

// Neigh reads the client's neighbour entry for addr (what `ip neigh` shows).
func (c *Cluster) Neigh(addr netip.Addr) (Neighbour, error) {
	h, err := nsHandle(c.Client.NS)
	if err != nil {
		return Neighbour{}, err
	}
	defer h.Close()
	l, err := h.LinkByName("eth0")
	if err != nil {
		return Neighbour{}, err
	}
	fam := netlink.FAMILY_V4
	if addr.Is6() {
		fam = netlink.FAMILY_V6
	}
	ns, err := h.NeighList(l.Attrs().Index, fam)
	if err != nil {
		return Neighbour{}, err
	}
	for _, n := range ns {
		if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == addr {
			return Neighbour{MAC: n.HardwareAddr, State: neighState(n.State)}, nil
		}
	}
	return Neighbour{}, nil
}

func neighState(s int) string {
	for bit, name := range map[int]string{
		netlink.NUD_INCOMPLETE: "INCOMPLETE", netlink.NUD_REACHABLE: "REACHABLE", netlink.NUD_STALE: "STALE",
		netlink.NUD_DELAY: "DELAY", netlink.NUD_PROBE: "PROBE", netlink.NUD_FAILED: "FAILED",
		netlink.NUD_NOARP: "NOARP", netlink.NUD_PERMANENT: "PERMANENT",
	} {
		if s&bit != 0 {
			return name
		}
	}
	return fmt.Sprintf("0x%x", s)
}

// Resolve makes the client resolve addr (a ping) until its neighbour entry
// points at want.
func (c *Cluster) Resolve(ctx context.Context, addr netip.Addr, want net.HardwareAddr, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c.Ping(ctx, addr)
		n, err := c.Neigh(addr)
		if err == nil && bytes.Equal(n.MAC, want) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("e2e: client's entry for %s is %v %s, want %s (last read: %w)", addr, n.MAC, n.State, want, err)
		}
	}
}

// NeighWatch follows the client's neighbour table through netlink
// notifications (what `ip monitor neigh` shows), stamping each when read.
type NeighWatch struct {
	ch   chan netlink.NeighUpdate
	stop func()
}

// WatchNeigh starts following the client's neighbour table. Call Close.
func (c *Cluster) WatchNeigh() (*NeighWatch, error) {
	nsh, err := netns.GetFromName(c.Client.NS)
	if err != nil {
		return nil, fmt.Errorf("e2e: client namespace: %w", err)
	}
	defer func() { _ = nsh.Close() }()
	ch := make(chan netlink.NeighUpdate, 4096)
	done := make(chan struct{})
	closing := make(chan struct{})
	err = netlink.NeighSubscribeWithOptions(ch, done, netlink.NeighSubscribeOptions{
		Namespace: &nsh,
		ErrorCallback: func(err error) {
			select {
			case <-closing:
			default:
				c.Logf("neighbour notifications: %v", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("e2e: watch client neighbours: %w", err)
	}
	return &NeighWatch{ch: ch, stop: func() {
		close(closing)
		close(done)
		for range ch { // until the subscription closes it
		}
	}}, nil
}

// Close ends the watch.
func (w *NeighWatch) Close() { w.stop() }

// Drain forgets the notifications received so far.
func (w *NeighWatch) Drain() {
	for {
		select {
		case <-w.ch:
		default:
			return
		}
	}
}

// WaitMAC waits until, for every address in addrs, a notification says the
// entry now points at mac, and returns when each came.
func (w *NeighWatch) WaitMAC(ctx context.Context, mac net.HardwareAddr, timeout time.Duration, addrs ...netip.Addr) (map[netip.Addr]time.Time, error) {
	got := map[netip.Addr]time.Time{}
	deadline := time.After(timeout)
	for len(got) < len(addrs) {
		select {
		case u, ok := <-w.ch:
			if !ok {
				return got, errors.New("e2e: neighbour notifications ended")
			}
			at := time.Now()
			a, _ := netip.AddrFromSlice(u.IP)
			a = a.Unmap()
			if u.Type != unix.RTM_NEWNEIGH || !bytes.Equal(u.HardwareAddr, mac) {
				continue
			}
			for _, want := range addrs {
				if a == want {
					if _, seen := got[a]; !seen {
						got[a] = at
					}
				}
			}
		case <-deadline:
			return got, fmt.Errorf("e2e: client not at %s for all of %v after %v (got %v)", mac, addrs, timeout, got)
		case <-ctx.Done():
			return got, ctx.Err()
		}
	}
	return got, nil
}
