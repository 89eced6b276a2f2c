package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// The L2 pool: inside the data segment's subnets, so the client resolves
// its addresses on the link.
var L2PoolRanges = []string{"192.0.2.200/29", "2001:db8:1::200/125"}

// LocktimeGap separates one failover from the next. Linux ignores a
// neighbour update that comes within a second (locktime) of the previous
// one, and real failovers do not follow each other that closely.
const LocktimeGap = 1200 * time.Millisecond

// L2Service is a dual-stack allocation announced over L2.
type L2Service struct {
	Alloc *ipamv1.Allocation
	Addrs []netip.Addr // IPv4 first
	Owner *Node
}

// V4 is the service's IPv4 address.
func (s *L2Service) V4() netip.Addr { return s.Addrs[0] }

// SetupL2 creates pool "l2", an L2 advertisement of it on eth0 and a
// dual-stack allocation from it, waits until one node announces both
// addresses, and makes the client resolve them to that node.
//
// The planner picks an owner per address (rendezvous of address and node
// name), so the two addresses of a dual-stack allocation may go to
// different nodes; with this lab's node names and pool, the first
// allocation's two land on one node, which the failover measurements rely
// on (after a move, both follow the only other node). WaitL2Owner fails,
// saying so, if that ever changes.
func (c *Cluster) SetupL2(ctx context.Context) (*L2Service, error) {
	if err := c.CreatePool(ctx, "l2", L2PoolRanges...); err != nil {
		return nil, err
	}
	if err := c.CreateL2Advertisement(ctx, "l2", "l2", "eth0"); err != nil {
		return nil, err
	}
	alloc, err := c.Allocate(ctx, "default/web", "l2", true)
	if err != nil {
		return nil, err
	}
	addrs, err := Addrs(alloc)
	if err != nil {
		return nil, err
	}
	if len(addrs) != 2 || !addrs[0].Is4() || !addrs[1].Is6() {
		return nil, fmt.Errorf("e2e: allocation %s has addresses %v, want IPv4 and IPv6", alloc.GetName(), addrs)
	}
	svc := &L2Service{Alloc: alloc, Addrs: addrs}
	if svc.Owner, err = c.WaitL2Owner(ctx, 10*time.Second, addrs...); err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if err := c.Resolve(ctx, a, svc.Owner.MAC, 5*time.Second); err != nil {
			return nil, err
		}
	}
	return svc, nil
}

// FailoverKind is how a failover is caused.
type FailoverKind int

// The ways to move an address off its owner.
const (
	// Kill SIGKILLs the owner's announcerd (restarted after the trial).
	Kill FailoverKind = iota + 1
	// LinkDown takes the owner's eth0 down (up again after the trial).
	LinkDown
	// Drain calls DrainAnnouncer on the owner (undrained after the trial).
	Drain
	// Hang SIGSTOPs the owner's announcerd: its connection stays up but its
	// heartbeats stop (SIGCONT after the trial; it then reconnects).
	Hang
	// Exclude labels the owner node.kubernetes.io/exclude-from-external-
	// load-balancers through its Node resource, as the k8s adapter does for
	// a labelled Kubernetes Node (the resource is deleted after the trial).
	Exclude
)

// ExcludeLabel is Kubernetes' label that keeps a node from announcing.
const ExcludeLabel = "node.kubernetes.io/exclude-from-external-load-balancers"

// makeBeforeBreak reports whether the old owner keeps answering until it
// hears of the move (the IPAM moves the addresses first).
func (k FailoverKind) makeBeforeBreak() bool { return k == Drain || k == Exclude }

func (k FailoverKind) String() string {
	switch k {
	case Kill:
		return "kill"
	case LinkDown:
		return "linkdown"
	case Drain:
		return "drain"
	case Hang:
		return "hang"
	case Exclude:
		return "exclude"
	}
	return fmt.Sprintf("FailoverKind(%d)", int(k))
}

// Failover is one trial's result.
type Failover struct {
	From, To string
	// Switch is, per address, the time from the cause (the kill, the link
	// going down, the drain call) until the client's neighbour entry
	// pointed at the new owner.
	Switch map[netip.Addr]time.Duration
	// Outage is what the client lost. For Kill and LinkDown it is the
	// longest Switch: the old owner is gone from the cause on. For Drain
	// and Exclude the old owner keeps answering until it hears of the
	// move, so it is the time from its last ARP reply (seen by the prober)
	// until the client's IPv4 entry pointed at the new owner, and zero when
	// the entry moved first (make before break).
	Outage time.Duration
}

// MeasureFailover moves svc's addresses trials times by kind, each time
// off the current owner, and returns each trial's result. svc.Owner follows
// the addresses.
func (c *Cluster) MeasureFailover(ctx context.Context, svc *L2Service, kind FailoverKind, trials int) ([]Failover, error) {
	watch, err := c.WatchNeigh()
	if err != nil {
		return nil, err
	}
	defer watch.Close()
	var prober *ARPProber
	if kind.makeBeforeBreak() {
		if prober, err = c.StartARPProber(svc.V4(), 2*time.Millisecond); err != nil {
			return nil, err
		}
		defer func() { _ = prober.Stop() }()
	}
	for _, a := range svc.Addrs {
		if n, err := c.Neigh(a); err != nil || !bytes.Equal(n.MAC, svc.Owner.MAC) {
			return nil, fmt.Errorf("e2e: before the first trial the client has %s at %v %s, want %s (read: %w)", a, n.MAC, n.State, svc.Owner.MAC, err)
		}
	}
	var out []Failover
	lastSwitch := time.Now()
	for trial := range trials {
		select {
		case <-time.After(time.Until(lastSwitch.Add(LocktimeGap))):
		case <-ctx.Done():
			return out, ctx.Err()
		}
		old := svc.Owner
		// The client must still be at the owner: nothing (a restored node's
		// late announcement, say) may have pulled it away since the last
		// trial.
		for _, a := range svc.Addrs {
			if n, err := c.Neigh(a); err != nil || !bytes.Equal(n.MAC, old.MAC) {
				return out, fmt.Errorf("e2e: before %s trial %d the client has %s at %v %s, not at the owner %s (%s) (read: %w)", kind, trial, a, n.MAC, n.State, old.Name, old.MAC, err)
			}
		}
		watch.Drain()
		start := time.Now()
		if err := c.cause(ctx, kind, old); err != nil {
			return out, fmt.Errorf("e2e: %s trial %d: %w", kind, trial, err)
		}
		at, to, err := c.waitSwitch(ctx, watch, old.MAC, svc.Addrs)
		if err != nil {
			return out, fmt.Errorf("e2e: %s trial %d off %s: %w", kind, trial, old.Name, err)
		}
		f := Failover{From: old.Name, To: to.Name, Switch: map[netip.Addr]time.Duration{}}
		for a, t := range at {
			f.Switch[a] = t.Sub(start)
			f.Outage = max(f.Outage, t.Sub(start))
			lastSwitch = later(lastSwitch, t)
		}
		if kind.makeBeforeBreak() {
			last, err := waitSilent(ctx, prober, old.MAC)
			if err != nil {
				return out, fmt.Errorf("e2e: %s trial %d: %s: %w", kind, trial, old.Name, err)
			}
			f.Outage = max(0, at[svc.V4()].Sub(last))
		}
		c.Logf("%s trial %d: %s -> %s: outage %v, switch %v", kind, trial, f.From, f.To, ms(f.Outage), f.Switch)
		out = append(out, f)
		svc.Owner = to
		if err := c.restore(ctx, kind, old); err != nil {
			return out, fmt.Errorf("e2e: %s trial %d: restoring %s: %w", kind, trial, old.Name, err)
		}
	}
	return out, nil
}

// cutOffMsg is what announcerd logs when its grace period without the IPAM
// ends and it stops answering L2.
const cutOffMsg = "cut off from the IPAM past the grace period"

// countLog counts the lines of the node's current announcerd log that
// contain s.
func (n *Node) countLog(s string) (int, error) {
	b, err := os.ReadFile(n.Proc().LogPath)
	if err != nil {
		return 0, fmt.Errorf("e2e: %s: %w", n.Name, err)
	}
	return bytes.Count(b, []byte(s)), nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Outages returns the trials' outages.
func Outages(fs []Failover) Samples {
	out := make(Samples, len(fs))
	for i, f := range fs {
		out[i] = f.Outage
	}
	return out
}

func (c *Cluster) cause(ctx context.Context, kind FailoverKind, n *Node) error {
	switch kind {
	case Kill:
		n.Kill()
		return nil
	case Hang:
		return n.Proc().Signal(syscall.SIGSTOP)
	case LinkDown:
		if c.opts.IPAMOverDataLink {
			var err error
			if n.cutOffs, err = n.countLog(cutOffMsg); err != nil {
				return err
			}
		}
		_, err := n.Host.Run(ctx, "ip", "link", "set", "eth0", "down")
		return err
	case Drain:
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_, err := c.Announcers.DrainAnnouncer(cctx, &ipamv1.DrainAnnouncerRequest{Name: n.ResourceName()})
		return err
	case Exclude:
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_, err := c.Config.CreateNode(cctx, &ipamv1.CreateNodeRequest{Parent: Parent, NodeId: n.Name, Node: &ipamv1.Node{Labels: map[string]string{ExcludeLabel: ""}}})
		return err
	}
	return fmt.Errorf("unknown failover kind %v", kind)
}

func (c *Cluster) restore(ctx context.Context, kind FailoverKind, n *Node) error {
	switch kind {
	case Kill:
		return n.Start(ctx)
	case Hang:
		if err := n.Proc().Signal(syscall.SIGCONT); err != nil {
			return err
		}
		return n.WaitLive(ctx)
	case LinkDown:
		if c.opts.IPAMOverDataLink {
			// The node is cut off from the IPAM too and still answers for
			// the addresses it had until its grace period ends. Bring the
			// link back only then, as after an outage longer than the
			// grace period; a shorter one would let the node announce
			// addresses that have moved (see docs/performance.md).
			err := netlab.Eventually(ctx, 10*time.Second, 20*time.Millisecond, func(context.Context) error {
				k, err := n.countLog(cutOffMsg)
				if err == nil && k <= n.cutOffs {
					err = errors.New("announcerd has not given up its L2 addresses yet")
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("%s: %w", n.Name, err)
			}
		}
		if _, err := n.Host.Run(ctx, "ip", "link", "set", "eth0", "up"); err != nil {
			return err
		}
		return n.WaitLive(ctx)
	case Drain:
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		if _, err := c.Announcers.UndrainAnnouncer(cctx, &ipamv1.UndrainAnnouncerRequest{Name: n.ResourceName()}); err != nil {
			return err
		}
		return netlab.Eventually(ctx, 10*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
			a, err := n.Announcer(ctx)
			if err != nil {
				return err
			}
			if a.GetDraining() {
				return errors.New("still draining")
			}
			return nil
		})
	case Exclude:
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		if _, err := c.Config.DeleteNode(cctx, &ipamv1.DeleteNodeRequest{Name: Parent + "/nodes/" + n.Name}); err != nil {
			return err
		}
		return netlab.Eventually(ctx, 10*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
			a, err := n.Announcer(ctx)
			if err != nil {
				return err
			}
			if a.GetExcluded() {
				return errors.New("still excluded")
			}
			return nil
		})
	}
	return fmt.Errorf("unknown failover kind %v", kind)
}

// waitSwitch waits until the client's entries for every address point at
// one node other than the one with MAC from, and returns when each moved
// and to which node.
func (c *Cluster) waitSwitch(ctx context.Context, w *NeighWatch, from net.HardwareAddr, addrs []netip.Addr) (map[netip.Addr]time.Time, *Node, error) {
	const timeout = 5 * time.Second
	deadline := time.After(timeout)
	at := map[netip.Addr]time.Time{}
	var to *Node
	for len(at) < len(addrs) {
		select {
		case u, ok := <-w.ch:
			if !ok {
				return nil, nil, errors.New("neighbour notifications ended")
			}
			t := time.Now()
			a, _ := netip.AddrFromSlice(u.IP)
			a = a.Unmap()
			n := c.NodeByMAC(u.HardwareAddr)
			if n == nil || bytes.Equal(u.HardwareAddr, from) || !contains(addrs, a) {
				continue
			}
			if to != nil && to != n {
				return nil, nil, fmt.Errorf("addresses moved to both %s and %s", to.Name, n.Name)
			}
			to = n
			if _, seen := at[a]; !seen {
				at[a] = t
			}
		case <-deadline:
			var states []string
			for _, a := range addrs {
				n, err := c.Neigh(a)
				states = append(states, fmt.Sprintf("%s at %v %s %v", a, n.MAC, n.State, err))
			}
			return nil, nil, fmt.Errorf("client still not moved off %s after %v: %v", from, timeout, states)
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	return at, to, nil
}

func contains(addrs []netip.Addr, a netip.Addr) bool {
	for _, x := range addrs {
		if x == a {
			return true
		}
	}
	return false
}

// waitSilent waits until mac has not answered the prober for a while and
// returns its last answer.
func waitSilent(ctx context.Context, p *ARPProber, mac net.HardwareAddr) (time.Time, error) {
	const quiet = 150 * time.Millisecond
	var last time.Time
	err := netlab.Eventually(ctx, 5*time.Second, 10*time.Millisecond, func(context.Context) error {
		last = p.LastFrom(mac)
		if last.IsZero() {
			return errors.New("never answered the prober")
		}
		if since := time.Since(last); since < quiet {
			return fmt.Errorf("still answering (%v ago)", since)
		}
		return nil
	})
	return last, err
}
