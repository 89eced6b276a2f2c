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
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

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
	// TenantOf returns node i's tenant (nil: Tenant for every node), for
	// labs standing in for several clusters that share the IPAM.
	TenantOf func(i int) string
	// AnnouncerArgs are extra announcerd flags.
	AnnouncerArgs []string
	// IPAMOverDataLink makes the nodes reach ipamd over eth0, the link
	// their L2 addresses are announced on, instead of over a separate
	// management link: ctl joins the data segment too (IPAMDataAddr) and
	// the nodes get no eth1. A node whose eth0 goes down then loses its
	// IPAM session as well, and its addresses move only when the IPAM's
	// heartbeat watchdog ends that session.
	IPAMOverDataLink bool
	// Replicas is how many ipamd replicas run (0 or 1: one, with its
	// embedded etcd). More share one etcd process started from EtcdBin in
	// the ctl namespace; replica i listens on ReplicaAddr(i), and every
	// announcerd is given all of them.
	Replicas int
	// EtcdBin is the etcd binary (see EtcdBinary), for Replicas > 1.
	EtcdBin string
	// EtcdMembers is how many members the shared etcd of Replicas > 1
	// has (0 or 1: one); member i serves clients on EtcdMemberURL(i) in
	// the ctl namespace, and every replica is given all of them.
	EtcdMembers int
	// Logf receives a line per step worth knowing (nil: discarded).
	Logf func(format string, args ...any)
}

// EtcdMemberURL is where member i of the shared etcd of a Cluster with
// several replicas serves clients, on the ctl namespace's own loopback:
// port 2379 + 10·i.
func EtcdMemberURL(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", 2379+10*i) }

func etcdPeerURL(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", 2380+10*i) }

// EtcdEndpoints is every member's client URL, comma-separated.
func (c *Cluster) EtcdEndpoints() string {
	urls := make([]string, len(c.etcd))
	for i := range urls {
		urls[i] = EtcdMemberURL(i)
	}
	return strings.Join(urls, ",")
}

// ReplicaAddr is where ipamd replica i listens: IPAMAddr's address, port
// 7400 + 10·i.
func ReplicaAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(IPAMAddr.Addr(), IPAMAddr.Port()+uint16(10*i)) //nolint:gosec // a handful of replicas
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
	Groups      ipamv1.GlobalGroupServiceClient
	Announcers  ipamv1.AnnouncerServiceClient

	opts    Options
	dataDir string
	conn    *grpc.ClientConn
	health  healthpb.HealthClient

	// health reaches each replica alone (Replicas > 1), for StartReplica.
	replicaHealth []healthpb.HealthClient
	replicaConns  []*grpc.ClientConn

	mu    sync.Mutex
	ipamd []*netlab.Proc // one per replica
	etcd  []*netlab.Proc // the shared etcd's members (Replicas > 1)
}

// Node is one node: a namespace with eth0 on the data segment and eth1 on
// the management segment, running announcerd.
type Node struct {
	Index  int
	Name   string
	Host   *netlab.Host
	Labels map[string]string
	MAC    net.HardwareAddr // eth0's
	// Tenant is the tenant (cluster) the node belongs to.
	Tenant string

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
	made := c // "return nil, err" sets c to nil before this runs
	defer func() {
		if err != nil {
			err = errors.Join(err, made.Close())
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
		n := &Node{Index: i, Name: fmt.Sprintf("node%d", i), Labels: opts.Labels(i), Tenant: Tenant, c: c}
		if opts.TenantOf != nil {
			n.Tenant = opts.TenantOf(i)
		}
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
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(DialerIn(c.Ctl.NS)),
		// ipamd restarts under this connection: reconnect quickly.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, MaxDelay: 300 * time.Millisecond}, MinConnectTimeout: 2 * time.Second}),
	}
	target := "passthrough:///" + IPAMAddr.String()
	c.ipamd = make([]*netlab.Proc, max(opts.Replicas, 1))
	if opts.Replicas > 1 {
		// Calls go to every replica that is up, round robin; a restarting
		// one is skipped.
		rs := manual.NewBuilderWithScheme("e2e-replicas")
		var addrs []resolver.Address
		for i := range opts.Replicas {
			addr := ReplicaAddr(i).String()
			addrs = append(addrs, resolver.Address{Addr: addr})
			rc, err := grpc.NewClient("passthrough:///"+addr, dialOpts...)
			if err != nil {
				return nil, fmt.Errorf("e2e: grpc client: %w", err)
			}
			c.replicaConns = append(c.replicaConns, rc)
			c.replicaHealth = append(c.replicaHealth, healthpb.NewHealthClient(rc))
		}
		rs.InitialState(resolver.State{Addresses: addrs})
		target = "e2e-replicas:///ipamd"
		dialOpts = append(dialOpts, grpc.WithResolvers(rs), grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`))
	}
	c.conn, err = grpc.NewClient(target, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("e2e: grpc client: %w", err)
	}
	c.Pools = ipamv1.NewPoolServiceClient(c.conn)
	c.Allocations = ipamv1.NewAllocationServiceClient(c.conn)
	c.Config = ipamv1.NewAnnouncementServiceClient(c.conn)
	c.Groups = ipamv1.NewGlobalGroupServiceClient(c.conn)
	c.Announcers = ipamv1.NewAnnouncerServiceClient(c.conn)
	c.health = healthpb.NewHealthClient(c.conn)
	if opts.Replicas > 1 {
		if err := c.startEtcd(ctx); err != nil {
			return nil, err
		}
	}
	for i := range c.ipamd {
		if err := c.StartReplica(ctx, i); err != nil {
			return nil, err
		}
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
	for _, rc := range c.replicaConns {
		errs = append(errs, rc.Close())
	}
	errs = append(errs, c.Lab.Close())
	return errors.Join(errs...)
}

// Logf logs through Options.Logf.
func (c *Cluster) Logf(format string, args ...any) { c.opts.Logf(format, args...) }

// StartIPAMD starts ipamd (replica 0) in the ctl namespace on the
// cluster's data directory and waits until it serves.
func (c *Cluster) StartIPAMD(ctx context.Context) error { return c.StartReplica(ctx, 0) }

// StartReplica starts ipamd replica i in the ctl namespace (with a single
// replica, on the cluster's data directory with its embedded etcd; with
// several, against the shared etcd) and waits until it serves.
func (c *Cluster) StartReplica(ctx context.Context, i int) error {
	listen := ReplicaAddr(i).String()
	if c.opts.IPAMOverDataLink {
		listen = fmt.Sprintf(":%d", ReplicaAddr(i).Port()) // on the data segment too
	}
	argv := []string{
		filepath.Join(c.opts.Bin, "ipamd"),
		"--listen", listen, "--ops-listen", fmt.Sprintf("127.0.0.1:%d", ReplicaAddr(i).Port()+1),
		"--log-level", "debug", "--release-hold", "0s",
	}
	health := c.health
	if len(c.replicaHealth) > 0 {
		argv = append(argv, "--etcd-endpoints", c.EtcdEndpoints())
		health = c.replicaHealth[i]
	} else {
		argv = append(argv, "--data-dir", c.dataDir)
	}
	name := "ipamd"
	if len(c.ipamd) > 1 {
		name = fmt.Sprintf("ipamd%d", i)
	}
	p, err := c.Ctl.Start(name, argv, nil)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.ipamd[i] = p
	c.mu.Unlock()
	err = netlab.Eventually(ctx, 60*time.Second, 50*time.Millisecond, func(ctx context.Context) error {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("ipamd exited (%w): %s", err, p.Tail(20))
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		resp, err := health.Check(cctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("health %s", resp.GetStatus())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("e2e: ipamd replica %d not serving: %w", i, err)
	}
	return nil
}

// startEtcd starts the etcd that several replicas share (EtcdMembers
// members), in the ctl namespace, and waits until each accepts
// connections.
func (c *Cluster) startEtcd(ctx context.Context) error {
	if c.opts.EtcdBin == "" {
		return errors.New("e2e: Options.Replicas > 1 needs Options.EtcdBin")
	}
	n := max(c.opts.EtcdMembers, 1)
	c.etcd = make([]*netlab.Proc, n)
	for i := range n {
		if err := c.execEtcd(i, "new"); err != nil {
			return err
		}
	}
	dial := DialerIn(c.Ctl.NS)
	for i, p := range c.etcd {
		err := netlab.Eventually(ctx, 30*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
			if exited, err := p.Exited(); exited {
				return fmt.Errorf("e2e: etcd member %d exited (%w): %s", i, err, p.Tail(20))
			}
			conn, err := dial(ctx, strings.TrimPrefix(EtcdMemberURL(i), "http://"))
			if err != nil {
				return err
			}
			return conn.Close()
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// execEtcd starts member i of the shared etcd with its data in the lab
// and the given --initial-cluster-state ("new", or "existing" for a member
// restarted on its data).
func (c *Cluster) execEtcd(i int, state string) error {
	var initial []string
	for j := range c.etcd {
		initial = append(initial, fmt.Sprintf("etcd%d=%s", j, etcdPeerURL(j)))
	}
	args := EtcdArgs(filepath.Join(c.Lab.Dir(), fmt.Sprintf("etcd%d-data", i)), EtcdMemberURL(i), etcdPeerURL(i))
	// EtcdArgs makes a one-member cluster: name this member and list them
	// all.
	args[1] = fmt.Sprintf("etcd%d", i)
	for j := range args {
		if args[j] == "--initial-cluster" {
			args[j+1] = strings.Join(initial, ",")
		}
	}
	args = append(args, "--initial-cluster-state", state)
	name := "etcd"
	if len(c.etcd) > 1 {
		name = fmt.Sprintf("etcd%d", i)
	}
	p, err := c.Ctl.Start(name, append([]string{c.opts.EtcdBin}, args...), nil)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.etcd[i] = p
	c.mu.Unlock()
	return nil
}

// RestartEtcdMember starts member i of the shared etcd again on its data
// (after EtcdMember(i).Kill) and waits until it says who leads.
func (c *Cluster) RestartEtcdMember(ctx context.Context, i int) error {
	if err := c.execEtcd(i, "existing"); err != nil {
		return err
	}
	p := c.EtcdMember(i)
	return netlab.Eventually(ctx, 30*time.Second, 50*time.Millisecond, func(ctx context.Context) error {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("e2e: etcd member %d exited (%w): %s", i, err, p.Tail(20))
		}
		_, err := c.EtcdMemberStatus(ctx, i)
		return err
	})
}

// EtcdMember is member i of the shared etcd (Replicas > 1).
func (c *Cluster) EtcdMember(i int) *netlab.Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.etcd[i]
}

// ReplicaProc is ipamd replica i's current process.
func (c *Cluster) ReplicaProc(i int) *netlab.Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ipamd[i]
}

// StopIPAMD sends ipamd (replica 0) SIGTERM and waits for it to exit; it
// returns how long that took and how it exited.
func (c *Cluster) StopIPAMD(ctx context.Context) (time.Duration, error) { return c.StopReplica(ctx, 0) }

// StopReplica sends replica i SIGTERM and waits for it to exit; it returns
// how long that took and how it exited.
func (c *Cluster) StopReplica(ctx context.Context, i int) (time.Duration, error) {
	c.mu.Lock()
	p := c.ipamd[i]
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
		return time.Since(start), fmt.Errorf("e2e: ipamd replica %d still running 30s after SIGTERM", i)
	}
	_, err := p.Exited()
	return time.Since(start), err
}

// IPAMDLog returns the tail of ipamd's (replica 0's) log.
func (c *Cluster) IPAMDLog(lines int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ipamd[0].Tail(lines)
}

// nodeIPAMAddrs is where the nodes reach the replicas, for --ipam.
func (c *Cluster) nodeIPAMAddrs() string {
	addrs := make([]string, len(c.ipamd))
	for i := range addrs {
		a := ReplicaAddr(i)
		if c.opts.IPAMOverDataLink {
			a = netip.AddrPortFrom(IPAMDataAddr.Addr(), a.Port())
		}
		addrs[i] = a.String()
	}
	return strings.Join(addrs, ",")
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
		"--ipam", n.c.nodeIPAMAddrs(), "--tenant", n.Tenant, "--node", n.Name,
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
func (n *Node) ResourceName() string { return "tenants/" + n.Tenant + "/announcers/" + n.Name }

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
