package localaddr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrNotDummy is returned by Run when a device of the configured name
// exists and is not a dummy device.
var ErrNotDummy = errors.New("localaddr: device exists and is not a dummy device")

// retryInterval is how soon Run retries an update that failed (the device
// deleted under it, say).
const retryInterval = time.Second

// The sysctls Run raises, with the lowest value that keeps the kernel from
// answering for the device's addresses. arp_ignore 1, 2 and 8 all refuse
// requests for addresses not on the receiving interface; 0 and 3 do not.
var sysctls = []struct {
	key string
	ok  func(v int) bool
	set int
}{
	{"net/ipv4/conf/all/arp_ignore", func(v int) bool { return v == 1 || v == 2 || v == 8 }, 1},
	{"net/ipv4/conf/all/arp_announce", func(v int) bool { return v >= 2 }, 2},
}

// Options tune a Device.
type Options struct {
	// AlsoKinds lists device kinds (as netlink names them: "bridge", ...)
	// that Run takes over, when such a device exists, besides "dummy". It
	// exists for tests on kernels built without the dummy driver, which use
	// a bridge with no ports instead; announcerd leaves it empty.
	AlsoKinds []string
}

// Device keeps the addresses the responder answers for on one dummy device.
// Create it with New, call Run, and call Set with every desired L2 set.
type Device struct {
	name    string
	logger  *slog.Logger
	opts    Options
	procSys string

	mu      sync.Mutex
	want    []netip.Addr        // sorted, deduplicated
	have    map[netip.Addr]bool // on the device, as far as we know
	link    netlink.Link        // nil until Run has prepared the device
	dirty   bool                // the last apply failed
	created bool                // Run created the device
}

// New returns a Device for the dummy device called name. It touches
// nothing until Run.
func New(name string, logger *slog.Logger, opts Options) *Device {
	return &Device{name: name, logger: logger, opts: opts, procSys: "/proc/sys", have: map[netip.Addr]bool{}}
}

// Set makes the device carry exactly the addresses in desired (a map of
// interface name to the addresses the responder answers for there, as the
// reconciler gives the responder). Once Run has prepared the device, Set
// applies the change before it returns; before that, Run applies the last
// one. It does not fail: a change that fails is logged and retried by Run.
func (d *Device) Set(desired map[string][]netip.Addr) error {
	var want []netip.Addr
	for _, addrs := range desired {
		want = append(want, addrs...)
	}
	slices.SortFunc(want, func(a, b netip.Addr) int { return a.Compare(b) })
	want = slices.Compact(want)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.want = want
	if d.link == nil {
		return nil
	}
	// A failure is logged and retried by Run every second, not returned:
	// the reconciler takes an error from Set to mean that the responder
	// does not answer from the new plan, which would hold up the node's
	// right to answer for every address.
	if err := d.applyLocked(); err != nil {
		d.logger.Warn("updating local addresses failed, retrying", "device", d.name, "error", err)
	}
	return nil
}

// Run prepares the device (sysctls; the device created if missing, up, and
// emptied of leftovers), applies the last Set, retries failed updates, and
// when ctx is done removes every address it added (deleting the device if
// it created it). It returns an error only when the device cannot be
// prepared or cleaned up.
func (d *Device) Run(ctx context.Context) error {
	if err := d.prepare(ctx); err != nil {
		return err
	}
	t := time.NewTicker(retryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return d.cleanup()
		case <-t.C:
			d.mu.Lock()
			if d.dirty {
				if err := d.applyLocked(); err != nil {
					d.logger.WarnContext(ctx, "updating local addresses failed, retrying", "device", d.name, "error", err)
				}
			}
			d.mu.Unlock()
		}
	}
}

func (d *Device) prepare(ctx context.Context) error {
	for _, s := range sysctls {
		if err := d.raiseSysctl(ctx, s.key, s.ok, s.set); err != nil {
			return err
		}
	}
	link, err := netlink.LinkByName(d.name)
	var notFound netlink.LinkNotFoundError
	switch {
	case errors.As(err, &notFound):
		if err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: d.name}}); err != nil {
			return fmt.Errorf("localaddr: create dummy device %s: %w", d.name, err)
		}
		if link, err = netlink.LinkByName(d.name); err != nil {
			return fmt.Errorf("localaddr: %s: %w", d.name, err)
		}
		d.created = true
		d.logger.InfoContext(ctx, "created dummy device for local addresses", "device", d.name)
	case err != nil:
		return fmt.Errorf("localaddr: %s: %w", d.name, err)
	case link.Type() != "dummy" && !slices.Contains(d.opts.AlsoKinds, link.Type()):
		return fmt.Errorf("%w: %s is a %s device", ErrNotDummy, d.name, link.Type())
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("localaddr: set %s up: %w", d.name, err)
	}
	stale, err := d.flush(link)
	if err != nil {
		return err
	}
	if len(stale) > 0 {
		d.logger.InfoContext(ctx, "removed leftover local addresses", "device", d.name, "addresses", stale)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.link = link
	if err := d.applyLocked(); err != nil {
		d.logger.WarnContext(ctx, "updating local addresses failed, retrying", "device", d.name, "error", err)
	}
	return nil
}

// raiseSysctl sets key to set unless its value is already ok.
func (d *Device) raiseSysctl(ctx context.Context, key string, ok func(int) bool, set int) error {
	path := filepath.Join(d.procSys, key)
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("localaddr: read %s: %w", path, err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("localaddr: %s: %q is not a number", path, b)
	}
	if ok(v) {
		return nil
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(set)+"\n"), 0o644); err != nil {
		return fmt.Errorf("localaddr: set %s to %d: %w", path, set, err)
	}
	d.logger.InfoContext(ctx, "raised sysctl so the kernel does not answer ARP for local service addresses",
		"sysctl", strings.ReplaceAll(key, "/", "."), "from", v, "to", set)
	return nil
}

// flush removes every address on link except IPv6 link-local ones and
// returns those it removed.
func (d *Device) flush(link netlink.Link) ([]netip.Addr, error) {
	addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("localaddr: addresses of %s: %w", d.name, err)
	}
	var removed []netip.Addr
	var errs []error
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if ip = ip.Unmap(); !ok || ip.Is6() && ip.IsLinkLocalUnicast() {
			continue
		}
		if err := netlink.AddrDel(link, &a); err != nil && !gone(err) {
			errs = append(errs, fmt.Errorf("localaddr: remove %s from %s: %w", ip, d.name, err))
			continue
		}
		removed = append(removed, ip)
	}
	return removed, errors.Join(errs...)
}

// Diff returns the addresses to add to and remove from a device that has
// have so that it has want. Both results are sorted.
func Diff(have map[netip.Addr]bool, want []netip.Addr) (add, remove []netip.Addr) {
	for _, a := range want {
		if !have[a] {
			add = append(add, a)
		}
	}
	for a := range have {
		if !slices.Contains(want, a) {
			remove = append(remove, a)
		}
	}
	slices.SortFunc(add, func(a, b netip.Addr) int { return a.Compare(b) })
	slices.SortFunc(remove, func(a, b netip.Addr) int { return a.Compare(b) })
	return add, remove
}

// applyLocked brings the device to d.want: removals first, so that an
// address the node no longer owns stops being local as early as possible.
func (d *Device) applyLocked() error {
	add, remove := Diff(d.have, d.want)
	var errs []error
	for _, a := range remove {
		if err := netlink.AddrDel(d.link, hostAddr(a)); err != nil && !gone(err) {
			errs = append(errs, fmt.Errorf("localaddr: remove %s from %s: %w", a, d.name, err))
			continue
		}
		delete(d.have, a)
	}
	for _, a := range add {
		if err := netlink.AddrAdd(d.link, hostAddr(a)); err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, fmt.Errorf("localaddr: add %s to %s: %w", a, d.name, err))
			continue
		}
		d.have[a] = true
	}
	d.dirty = len(errs) > 0
	return errors.Join(errs...)
}

// cleanup removes every address from the device, and the device if Run
// created it.
func (d *Device) cleanup() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	link := d.link
	d.link = nil
	if d.created {
		if err := netlink.LinkDel(link); err != nil {
			return fmt.Errorf("localaddr: delete %s: %w", d.name, err)
		}
		clear(d.have)
		return nil
	}
	if _, err := d.flush(link); err != nil {
		return err
	}
	clear(d.have)
	return nil
}

// hostAddr is a as a host address: /32 or /128, IPv6 without duplicate
// address detection (the address is meant to be on several nodes' devices
// during a move, and must be usable at once).
func hostAddr(a netip.Addr) *netlink.Addr {
	na := &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}}
	if a.Is6() {
		na.Flags = unix.IFA_F_NODAD
	}
	return na
}

// gone reports whether a delete failed only because the address (or its
// device) is already gone.
func gone(err error) bool {
	return errors.Is(err, unix.EADDRNOTAVAIL) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV)
}
