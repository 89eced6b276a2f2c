package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// Tenant is the tenant every node of a Cluster belongs to; Parent is its
// resource name.
const (
	Tenant = "t1"
	Parent = "tenants/" + Tenant
)

// MgmtSegment is the management segment: ipamd and the nodes' eth1.
const MgmtSegment = "mgmt"

// Fixed addresses of a Cluster.
var (
	IPAMAddr    = netip.AddrPortFrom(netip.MustParseAddr("198.51.100.1"), 7400)
	ClientAddr4 = netip.MustParseAddr("192.0.2.2")
	ClientAddr6 = netip.MustParseAddr("2001:db8:1::2")
	ProberAddr4 = netip.MustParseAddr("192.0.2.5")
	// IPAMDataAddr is where the nodes reach ipamd when
	// Options.IPAMOverDataLink is set: ctl's address on the data segment.
	IPAMDataAddr = netip.AddrPortFrom(netip.MustParseAddr("192.0.2.6"), 7400)
)

// NodeAddr4 and NodeAddr6 are node i's data addresses (on eth0).
func NodeAddr4(i int) netip.Addr { return netip.AddrFrom4([4]byte{192, 0, 2, byte(11 + i)}) }

// NodeAddr6 is node i's IPv6 data address.
func NodeAddr6(i int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("2001:db8:1::%d", 11+i)) }

func nodeMgmt(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(11 + i)}), 24)
}

// Options describe a Cluster.
type Options struct {
	// Bin holds ipamd and announcerd (see Binaries).
	Bin string
	// Nodes is how many nodes run announcerd.
	Nodes int
	// Labels returns node i's labels (nil: none).
	Labels func(i int) map[string]string
	// AnnouncerArgs are extra announcerd flags.
	AnnouncerArgs []string
	// IPAMOverDataLink makes the nodes reach ipamd over eth0, the link
	// their L2 addresses are announced on, instead of over a separate
	// management link: ctl joins the data segment too (IPAMDataAddr) and
	// the nodes get no eth1. A node whose eth0 goes down then loses its
	// IPAM session as well, and its addresses move only when the IPAM's
	// heartbeat watchdog ends that session.
	IPAMOverDataLink bool
	// Logf receives a line per step worth knowing (nil: discarded).
	Logf func(format string, args ...any)
}

// Cluster is ipamd and announcerds in a lab; see the package doc.
type Cluster struct {
	Lab    *netlab.Lab
	Ctl    *netlab.Host // ipamd
	Client *netlab.Host // the L2 client
	Prober *netlab.Host // the ARP prober (see StartARPProber)
	Nodes  []*Node

	Pools       ipamv1.PoolServiceClient
	Allocations ipamv1.AllocationServiceClient
	Config      ipamv1.AnnouncementServiceClient
	Announcers  ipamv1.AnnouncerServiceClient

	opts    Options
	dataDir string
	conn    *grpc.ClientConn
	health  healthpb.HealthClient

	mu    sync.Mutex
	ipamd *netlab.Proc
}

// Node is one node: a namespace with eth0 on the data segment and eth1 on
// the management segment, running announcerd.
type Node struct {
	Index  int
	Name   string
	Host   *netlab.Host
	Labels map[string]string
	MAC    net.HardwareAddr // eth0's

	c    *Cluster
	mu   sync.Mutex
	proc *netlab.Proc
	// cutOffs is how often the announcerd's log said it was cut off
	// from the IPAM past its grace period, when last counted.
	cutOffs int
}

// New builds a Cluster: the lab, ipamd (serving), and every node's
// announcerd (subscribed). On error it cleans up what it made.
func New(ctx context.Context, opts Options) (c *Cluster, err error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Labels == nil {
		opts.Labels = func(int) map[string]string { return nil }
	}
	lab, err := netlab.New(opts.Logf)
	if err != nil {
		return nil, err
	}
	c = &Cluster{Lab: lab, opts: opts, dataDir: filepath.Join(lab.Dir(), "ipamd-data")}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
			c = nil
		}
	}()
	pfx := func(a netip.Addr, bits int) netip.Prefix { return netip.PrefixFrom(a, bits) }
	if err := lab.AddSegment(ctx, MgmtSegment); err != nil {
		return nil, err
	}
	if c.Ctl, err = lab.AddHostOn(ctx, "ctl", MgmtSegment, pfx(IPAMAddr.Addr(), 24)); err != nil {
		return nil, err
	}
	if opts.IPAMOverDataLink {
		if err := c.Ctl.Attach(ctx, netlab.MainSegment, "eth1", pfx(IPAMDataAddr.Addr(), 24)); err != nil {
			return nil, err
		}
	}
	if c.Client, err = lab.AddHost(ctx, "client", pfx(ClientAddr4, 24), pfx(ClientAddr6, 64)); err != nil {
		return nil, err
	}
	if c.Prober, err = lab.AddHost(ctx, "prober", pfx(ProberAddr4, 24)); err != nil {
		return nil, err
	}
	for i := range opts.Nodes {
		n := &Node{Index: i, Name: fmt.Sprintf("node%d", i), Labels: opts.Labels(i), c: c}
		if n.Host, err = lab.AddHost(ctx, n.Name, pfx(NodeAddr4(i), 24), pfx(NodeAddr6(i), 64)); err != nil {
			return nil, err
		}
		// Keep eth0's IPv6 address across a link flap, as a node's
		// configured address would be.
		if _, err := n.Host.Run(ctx, "sysctl", "-qw", "net.ipv6.conf.all.keep_addr_on_down=1", "net.ipv6.conf.eth0.keep_addr_on_down=1"); err != nil {
			return nil, err
		}
		if !opts.IPAMOverDataLink {
			if err := n.Host.Attach(ctx, MgmtSegment, "eth1", nodeMgmt(i)); err != nil {
				return nil, err
			}
		}
		if n.MAC, err = linkMAC(n.Host.NS, "eth0"); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	c.conn, err = grpc.NewClient("passthrough:///"+IPAMAddr.String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(DialerIn(c.Ctl.NS)),
		// ipamd restarts under this connection: reconnect quickly.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, MaxDelay: 300 * time.Millisecond}, MinConnectTimeout: 2 * time.Second}),
	)
	if err != nil {
		return nil, fmt.Errorf("e2e: grpc client: %w", err)
	}
	c.Pools = ipamv1.NewPoolServiceClient(c.conn)
	c.Allocations = ipamv1.NewAllocationServiceClient(c.conn)
	c.Config = ipamv1.NewAnnouncementServiceClient(c.conn)
	c.Announcers = ipamv1.NewAnnouncerServiceClient(c.conn)
	c.health = healthpb.NewHealthClient(c.conn)
	if err := c.StartIPAMD(ctx); err != nil {
		return nil, err
	}
	for _, n := range c.Nodes {
		if err := n.Start(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Close stops every process (SIGTERM, then SIGKILL) and deletes the lab.
func (c *Cluster) Close() error {
	var errs []error
	if c.conn != nil {
		errs = append(errs, c.conn.Close())
	}
	errs = append(errs, c.Lab.Close())
	return errors.Join(errs...)
}

// Logf logs through Options.Logf.
func (c *Cluster) Logf(format string, args ...any) { c.opts.Logf(format, args...) }

// StartIPAMD starts ipamd in the ctl namespace on the cluster's data
// directory and waits until it serves.
func (c *Cluster) StartIPAMD(ctx context.Context) error {
	listen := IPAMAddr.String()
	if c.opts.IPAMOverDataLink {
		listen = fmt.Sprintf(":%d", IPAMAddr.Port()) // on the data segment too
	}
	p, err := c.Ctl.Start("ipamd", []string{
		filepath.Join(c.opts.Bin, "ipamd"),
		"--listen", listen, "--ops-listen", "127.0.0.1:7401",
		"--data-dir", c.dataDir, "--log-level", "debug", "--release-hold", "0s",
	}, nil)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.ipamd = p
	c.mu.Unlock()
	err = netlab.Eventually(ctx, 60*time.Second, 50*time.Millisecond, func(ctx context.Context) error {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("ipamd exited (%w): %s", err, p.Tail(20))
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		resp, err := c.health.Check(cctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health %s", resp.GetStatus())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("e2e: ipamd not serving: %w", err)
	}
	return nil
}

// StopIPAMD sends ipamd SIGTERM and waits for it to exit; it returns how
// long that took and how it exited.
func (c *Cluster) StopIPAMD(ctx context.Context) (time.Duration, error) {
	c.mu.Lock()
	p := c.ipamd
	c.mu.Unlock()
	start := time.Now()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		return time.Since(start), ctx.Err()
	case <-time.After(30 * time.Second):
		return time.Since(start), errors.New("e2e: ipamd still running 30s after SIGTERM")
	}
	_, err := p.Exited()
	return time.Since(start), err
}

// IPAMDLog returns the tail of ipamd's log.
func (c *Cluster) IPAMDLog(lines int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ipamd.Tail(lines)
}

// nodeIPAMAddr is where the nodes reach ipamd.
func (c *Cluster) nodeIPAMAddr() netip.AddrPort {
	if c.opts.IPAMOverDataLink {
		return IPAMDataAddr
	}
	return IPAMAddr
}

// NodeByName returns the node called name, or nil.
func (c *Cluster) NodeByName(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// NodeByMAC returns the node whose eth0 has mac, or nil.
func (c *Cluster) NodeByMAC(mac net.HardwareAddr) *Node {
	for _, n := range c.Nodes {
		if n.MAC.String() == mac.String() {
			return n
		}
	}
	return nil
}

// Start starts the node's announcerd and waits until the IPAM lists it as
// live with its interfaces.
func (n *Node) Start(ctx context.Context) error {
	keys := make([]string, 0, len(n.Labels))
	for k, v := range n.Labels {
		keys = append(keys, k+"="+v)
	}
	sort.Strings(keys)
	argv := []string{
		filepath.Join(n.c.opts.Bin, "announcerd"),
		"--ipam", n.c.nodeIPAMAddr().String(), "--tenant", Tenant, "--node", n.Name,
		"--ops-listen", "127.0.0.1:7402", "--log-level", "debug",
	}
	if len(keys) > 0 {
		argv = append(argv, "--labels", strings.Join(keys, ","))
	}
	argv = append(argv, n.c.opts.AnnouncerArgs...)
	p, err := n.Host.Start("announcerd", argv, nil)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.proc = p
	n.mu.Unlock()
	return n.WaitLive(ctx)
}

// WaitLive waits until the IPAM lists the node as live and reporting eth0.
func (n *Node) WaitLive(ctx context.Context) error {
	p := n.Proc()
	err := netlab.Eventually(ctx, 20*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("announcerd exited (%w): %s", err, p.Tail(20))
		}
		a, err := n.Announcer(ctx)
		if err != nil {
			return err
		}
		if !a.GetLive() {
			return errors.New("not live")
		}
		for _, itf := range a.GetInterfaces() {
			if itf.GetName() == "eth0" && itf.GetUp() {
				return nil
			}
		}
		return fmt.Errorf("eth0 not reported up: %v", a.GetInterfaces())
	})
	if err != nil {
		return fmt.Errorf("e2e: %s: %w", n.Name, err)
	}
	return nil
}

// WaitSubscribedSince waits until the node's current IPAM session started
// after t (a registration that outlived its session does not count).
func (n *Node) WaitSubscribedSince(ctx context.Context, t time.Time) error {
	return netlab.Eventually(ctx, 20*time.Second, 10*time.Millisecond, func(ctx context.Context) error {
		a, err := n.Announcer(ctx)
		if err != nil {
			return err
		}
		if ct := a.GetConnectTime().AsTime(); !a.GetLive() || ct.Before(t) {
			return fmt.Errorf("%s: live %v, session started %v, not after %v", n.Name, a.GetLive(), ct, t)
		}
		return nil
	})
}

// Announcer returns the IPAM's view of the node.
func (n *Node) Announcer(ctx context.Context) (*ipamv1.Announcer, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := n.c.Announcers.GetAnnouncer(cctx, &ipamv1.GetAnnouncerRequest{Name: n.ResourceName()})
	if err != nil {
		return nil, err
	}
	return resp.GetAnnouncer(), nil
}

// ResourceName is the node's announcer resource name.
func (n *Node) ResourceName() string { return Parent + "/announcers/" + n.Name }

// Proc is the node's current announcerd.
func (n *Node) Proc() *netlab.Proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// Kill SIGKILLs the node's announcerd and waits until it is gone.
func (n *Node) Kill() { n.Proc().Kill() }

// Terminate sends SIGTERM to the node's announcerd and waits up to 10 s for
// it to exit.
func (n *Node) Terminate() error {
	p := n.Proc()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.Done():
		_, err := p.Exited()
		return err
	case <-time.After(10 * time.Second):
		return fmt.Errorf("e2e: %s: announcerd still running 10s after SIGTERM", n.Name)
	}
}

// linkMAC returns the MAC address of ifname in namespace ns.
func linkMAC(ns, ifname string) (net.HardwareAddr, error) {
	h, err := nsHandle(ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	l, err := h.LinkByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("e2e: %s in %s: %w", ifname, ns, err)
	}
	return l.Attrs().HardwareAddr, nil
}

// nsHandle opens a netlink handle in namespace ns.
func nsHandle(ns string) (*netlink.Handle, error) {
	nsh, err := netns.GetFromName(ns)
	if err != nil {
		return nil, fmt.Errorf("e2e: namespace %s: %w", ns, err)
	}
	defer func() { _ = nsh.Close() }()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return nil, fmt.Errorf("e2e: netlink in %s: %w", ns, err)
	}
	return h, nil
}

// RequireRoot returns an error saying why the lab cannot run here, or nil.
func RequireRoot() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces)")
	}
	return nil
}
