// Package links watches the node's network interfaces with netlink: their
// names, MAC addresses, addresses and operational state. It is the only
// package of the announcer that reads the kernel's interface table.
package links

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
)

// Interface is one network interface.
type Interface struct {
	Name  string
	MAC   string
	Addrs []netip.Prefix
	// Up means operationally up (carrier), not only administratively.
	Up bool
}

// List reads the node's interfaces, loopback excluded, sorted by name.
func List() ([]Interface, error) {
	ls, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("links: list: %w", err)
	}
	var out []Interface
	for _, l := range ls {
		a := l.Attrs()
		if a.Flags&net.FlagLoopback != 0 {
			continue
		}
		// Up: carrier up; interfaces without operational state (some
		// virtual ones report "unknown") count when administratively up.
		itf := Interface{Name: a.Name, Up: a.OperState == netlink.OperUp || (a.OperState == netlink.OperUnknown && a.Flags&net.FlagUp != 0)}
		if len(a.HardwareAddr) > 0 {
			itf.MAC = a.HardwareAddr.String()
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return nil, fmt.Errorf("links: addresses of %s: %w", a.Name, err)
		}
		for _, ad := range addrs {
			ip, ok := netip.AddrFromSlice(ad.IP)
			if !ok {
				continue
			}
			ones, _ := ad.Mask.Size()
			itf.Addrs = append(itf.Addrs, netip.PrefixFrom(ip.Unmap(), ones))
		}
		slices.SortFunc(itf.Addrs, func(x, y netip.Prefix) int { return x.Addr().Compare(y.Addr()) })
		out = append(out, itf)
	}
	slices.SortFunc(out, func(x, y Interface) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// Watch calls fn with the full interface list at start and whenever a link
// or address changes (changes within 20 ms are coalesced), until ctx is
// done. It also re-reads every 10 s in case a notification was lost.
func Watch(ctx context.Context, logger *slog.Logger, fn func([]Interface)) error {
	done := make(chan struct{})
	defer close(done)
	lu := make(chan netlink.LinkUpdate, 64)
	au := make(chan netlink.AddrUpdate, 64)
	if err := netlink.LinkSubscribeWithOptions(lu, done, netlink.LinkSubscribeOptions{}); err != nil {
		return fmt.Errorf("links: subscribe: %w", err)
	}
	if err := netlink.AddrSubscribeWithOptions(au, done, netlink.AddrSubscribeOptions{}); err != nil {
		return fmt.Errorf("links: subscribe addresses: %w", err)
	}
	var last []Interface
	report := func() {
		itfs, err := List()
		if err != nil {
			logger.WarnContext(ctx, "reading interfaces failed", "error", err)
			return
		}
		if !equal(itfs, last) {
			last = itfs
			fn(itfs)
		}
	}
	report()
	poll := time.NewTicker(10 * time.Second)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-lu:
		case <-au:
		case <-poll.C:
		}
		// Coalesce a burst of notifications.
		settle := time.After(20 * time.Millisecond)
	drain:
		for {
			select {
			case <-lu:
			case <-au:
			case <-settle:
				break drain
			case <-ctx.Done():
				return nil
			}
		}
		report()
	}
}

func equal(a, b []Interface) bool {
	return slices.EqualFunc(a, b, func(x, y Interface) bool {
		return x.Name == y.Name && x.MAC == y.MAC && x.Up == y.Up && slices.Equal(x.Addrs, y.Addrs)
	})
}
