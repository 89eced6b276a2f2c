package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// Routers' addresses on the data segment, and the AS numbers.
var (
	FRRAddr4    = netip.MustParseAddr("192.0.2.1")
	FRRAddr6    = netip.MustParseAddr("2001:db8:1::1")
	BIRDAddr4   = netip.MustParseAddr("192.0.2.3")
	BIRDAddr6   = netip.MustParseAddr("2001:db8:1::3")
	GoBGPdAddr4 = netip.MustParseAddr("192.0.2.4")
	GoBGPdAddr6 = netip.MustParseAddr("2001:db8:1::4")
)

// NodeASN is the nodes' AS; FRR shares it (iBGP, which carries LOCAL_PREF),
// BIRD and gobgpd have their own (eBGP).
const (
	NodeASN   = 64512
	BIRDASN   = 64513
	GoBGPdASN = 64514
)

// BGPPoolRanges is the pool advertised over BGP.
var BGPPoolRanges = []string{"203.0.113.0/28", "2001:db8:2::/124"}

// BGPPeer returns a peer of every node (or of the nodes matching
// nodeLabels) with short timers, so that tests do not wait for defaults.
func BGPPeer(addr netip.Addr, peerASN uint32, nodeLabels map[string]string) *ipamv1.BGPPeer {
	p := &ipamv1.BGPPeer{
		MyAsn: NodeASN, PeerAsn: peerASN, PeerAddress: addr.String(),
		HoldTime: durationpb.New(3 * time.Second), KeepaliveTime: durationpb.New(time.Second),
		ConnectTime: durationpb.New(time.Second),
	}
	if nodeLabels != nil {
		p.NodeSelectors = []*ipamv1.LabelSelector{{MatchLabels: nodeLabels}}
	}
	return p
}

// CreateBGPPeer creates peer id.
func (c *Cluster) CreateBGPPeer(ctx context.Context, id string, p *ipamv1.BGPPeer) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := c.Config.CreateBGPPeer(ctx, &ipamv1.CreateBGPPeerRequest{Parent: Parent, BgpPeerId: id, BgpPeer: p}); err != nil {
		return fmt.Errorf("e2e: create BGP peer %s: %w", id, err)
	}
	return nil
}

// CreateBGPAdvertisement creates advertisement id.
func (c *Cluster) CreateBGPAdvertisement(ctx context.Context, id string, a *ipamv1.BGPAdvertisement) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := c.Config.CreateBGPAdvertisement(ctx, &ipamv1.CreateBGPAdvertisementRequest{Parent: Parent, BgpAdvertisementId: id, BgpAdvertisement: a}); err != nil {
		return fmt.Errorf("e2e: create BGP advertisement %s: %w", id, err)
	}
	return nil
}

// CreateBFDProfile creates profile id.
func (c *Cluster) CreateBFDProfile(ctx context.Context, id string, p *ipamv1.BFDProfile) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := c.Config.CreateBFDProfile(ctx, &ipamv1.CreateBFDProfileRequest{Parent: Parent, BfdProfileId: id, BfdProfile: p}); err != nil {
		return fmt.Errorf("e2e: create BFD profile %s: %w", id, err)
	}
	return nil
}

// CreateCommunity creates community aliases id, name=value each.
func (c *Cluster) CreateCommunity(ctx context.Context, id string, aliases map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	comm := &ipamv1.Community{}
	for k, v := range aliases {
		comm.Aliases = append(comm.Aliases, &ipamv1.CommunityAlias{Name: k, Value: v})
	}
	if _, err := c.Config.CreateCommunity(ctx, &ipamv1.CreateCommunityRequest{Parent: Parent, CommunityId: id, Community: comm}); err != nil {
		return fmt.Errorf("e2e: create community %s: %w", id, err)
	}
	return nil
}

// StartFRR adds an FRR router (host "frr") with every node as a neighbor,
// IPv4 and IPv6, with 1 s/3 s timers. bfd, when set, needs withZebra (bfdd
// runs then) and turns on BFD towards every node.
func (c *Cluster) StartFRR(ctx context.Context, asn uint32, withZebra bool, bfd *netlab.FRRBFD) (*netlab.FRR, error) {
	h, err := c.Lab.AddHost(ctx, "frr", netip.PrefixFrom(FRRAddr4, 24), netip.PrefixFrom(FRRAddr6, 64))
	if err != nil {
		return nil, err
	}
	cfg := netlab.FRRConfig{ASN: asn, RouterID: FRRAddr4, WithZebra: withZebra}
	for i := range c.Nodes {
		cfg.Neighbors = append(cfg.Neighbors,
			netlab.FRRNeighbor{Address: NodeAddr4(i), ASN: NodeASN, Keepalive: time.Second, HoldTime: 3 * time.Second, BFD: bfd, LocalAddress: FRRAddr4},
			netlab.FRRNeighbor{Address: NodeAddr6(i), ASN: NodeASN, Keepalive: time.Second, HoldTime: 3 * time.Second})
	}
	return h.StartFRR(ctx, cfg)
}

// StartBIRD adds a BIRD router (host "bird") with every node as an eBGP
// neighbor over IPv4 (protocol nodeI) and over IPv6 (nodeI_6).
func (c *Cluster) StartBIRD(ctx context.Context) (*netlab.BIRD, error) {
	return c.startBIRD(ctx, nil)
}

// StartBIRDBFD is StartBIRD with BFD at interval × mult on every IPv4
// session (a BFD session BIRD's BGP protocol requests, as BIRD users run
// it), hold time 9 s and error wait 1-2 s (BIRD's default would keep a
// session down for a minute after a BFD down).
func (c *Cluster) StartBIRDBFD(ctx context.Context, interval time.Duration, mult int) (*netlab.BIRD, error) {
	return c.startBIRD(ctx, &netlab.FRRBFD{Receive: interval, Transmit: interval, Multiplier: mult})
}

func (c *Cluster) startBIRD(ctx context.Context, bfd *netlab.FRRBFD) (*netlab.BIRD, error) {
	h, err := c.Lab.AddHost(ctx, "bird", netip.PrefixFrom(BIRDAddr4, 24), netip.PrefixFrom(BIRDAddr6, 64))
	if err != nil {
		return nil, err
	}
	cfg := netlab.BIRDConfig{RouterID: BIRDAddr4, ASN: BIRDASN, BFD: bfd}
	for i := range c.Nodes {
		n := netlab.BIRDNeighbor{Name: fmt.Sprintf("node%d", i), Address: NodeAddr4(i), LocalAddress: BIRDAddr4, ASN: NodeASN}
		if bfd != nil {
			n.BFD, n.HoldTime = true, 9*time.Second
			n.ErrorWait = [2]time.Duration{time.Second, 2 * time.Second}
		}
		cfg.Neighbors = append(cfg.Neighbors, n,
			netlab.BIRDNeighbor{Name: fmt.Sprintf("node%d_6", i), Address: NodeAddr6(i), LocalAddress: BIRDAddr6, ASN: NodeASN})
	}
	return h.StartBIRD(ctx, cfg)
}

// StartGoBGPd adds a gobgpd router (host "gobgpd") with every node as an
// eBGP neighbor over IPv4 and over IPv6.
func (c *Cluster) StartGoBGPd(ctx context.Context) (*netlab.GoBGPd, error) {
	h, err := c.Lab.AddHost(ctx, "gobgpd", netip.PrefixFrom(GoBGPdAddr4, 24), netip.PrefixFrom(GoBGPdAddr6, 64))
	if err != nil {
		return nil, err
	}
	cfg := netlab.GoBGPdConfig{ASN: GoBGPdASN, RouterID: GoBGPdAddr4}
	for i := range c.Nodes {
		cfg.Neighbors = append(cfg.Neighbors,
			netlab.GoBGPdNeighbor{Address: NodeAddr4(i), ASN: NodeASN},
			netlab.GoBGPdNeighbor{Address: NodeAddr6(i), ASN: NodeASN})
	}
	return h.StartGoBGPd(ctx, cfg)
}

// NextHops returns the next hops of a router's paths for prefix.
func NextHops(ctx context.Context, r netlab.Router, prefix netip.Prefix) ([]netip.Addr, error) {
	rib, err := r.RIB(ctx)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, p := range rib[prefix] {
		out = append(out, p.NextHop)
	}
	return out, nil
}

// WaitNextHops waits until r's paths for prefix come from exactly the
// next hops want (in any order; none: no path).
func WaitNextHops(ctx context.Context, r netlab.Router, prefix netip.Prefix, timeout time.Duration, want ...netip.Addr) error {
	return netlab.Eventually(ctx, timeout, 25*time.Millisecond, func(ctx context.Context) error {
		got, err := NextHops(ctx, r, prefix)
		if err != nil {
			return err
		}
		if !sameAddrs(got, want) {
			return fmt.Errorf("%s: %s via %v, want %v", r.Name(), prefix, got, want)
		}
		return nil
	})
}

func sameAddrs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !contains(b, x) {
			return false
		}
	}
	return true
}

// HostPrefix is the /32 or /128 of a.
func HostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// WaitBFDUp waits until FRR's bfdd has had the session with peer up for
// at least stable (whole seconds, as bfdd counts).
func WaitBFDUp(ctx context.Context, frr *netlab.FRR, peer netip.Addr, stable, timeout time.Duration) error {
	return netlab.Eventually(ctx, timeout, 100*time.Millisecond, func(ctx context.Context) error {
		out, err := frr.Vtysh(ctx, "show bfd peers json")
		if err != nil {
			return err
		}
		var peers []struct {
			Peer   string `json:"peer"`
			Status string `json:"status"`
			Uptime int    `json:"uptime"`
		}
		if err := json.Unmarshal([]byte(out), &peers); err != nil {
			return fmt.Errorf("bfd peers json: %w", err)
		}
		for _, p := range peers {
			if p.Peer != peer.String() {
				continue
			}
			if p.Status != "up" || time.Duration(p.Uptime)*time.Second < stable {
				return fmt.Errorf("BFD with %s is %s since %ds", peer, p.Status, p.Uptime)
			}
			return nil
		}
		return fmt.Errorf("no BFD session with %s", peer)
	})
}

// MeasureBFDWithdraw silences node's eth0 (every egress packet dropped, as
// if it died without a word) trials times and measures how long until FRR
// has removed prefix from its namespace's kernel (mon follows it). After
// each trial eth0 comes back and the test waits until BFD, the session and
// the route are back.
func (c *Cluster) MeasureBFDWithdraw(ctx context.Context, frr *netlab.FRR, mon *netlab.RouteMonitor, node *Node, prefix netip.Prefix, trials int) (Samples, error) {
	var out Samples
	for trial := range trials {
		if err := c.waitRouteBack(ctx, frr, node, prefix); err != nil {
			return out, fmt.Errorf("e2e: before BFD trial %d: %w", trial, err)
		}
		start := time.Now()
		if err := node.Host.DropEgress(ctx); err != nil {
			return out, err
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ev, err := mon.Wait(wctx, prefix, true, start)
		cancel()
		if rerr := node.Host.RestoreEgress(ctx); rerr != nil {
			return out, errors.Join(err, rerr)
		}
		if err != nil {
			return out, fmt.Errorf("e2e: BFD trial %d: %w", trial, err)
		}
		d := ev.At.Sub(start)
		c.Logf("bfd trial %d: %s withdrawn from FRR's kernel %v after %s went silent", trial, prefix, ms(d), node.Name)
		out = append(out, d)
	}
	return out, nil
}

// waitRouteBack waits until FRR has BFD up with node and prefix in its
// kernel table.
func (c *Cluster) waitRouteBack(ctx context.Context, frr *netlab.FRR, node *Node, prefix netip.Prefix) error {
	// A session that has just come up may flap once more (docs/lab.md):
	// measure only from a session up for a second.
	if err := WaitBFDUp(ctx, frr, NodeAddr4(node.Index), time.Second, 45*time.Second); err != nil {
		return err
	}
	return netlab.Eventually(ctx, 30*time.Second, 100*time.Millisecond, func(ctx context.Context) error {
		out, err := frr.Vtysh(ctx, "show ip route "+prefix.String()+" json")
		if err != nil {
			return err
		}
		if !strings.Contains(out, `"installed":true`) {
			return fmt.Errorf("%s not installed in FRR's kernel: %s", prefix, out)
		}
		return nil
	})
}

// FRRNeighbor is what FRR counts for one neighbor.
type FRRNeighbor struct {
	State       string
	UpdatesRecv int
	Established int // connections established
	Dropped     int // connections dropped
}

// FRRNeighborInfo reads FRR's counters for the neighbor at addr.
func FRRNeighborInfo(ctx context.Context, frr *netlab.FRR, addr netip.Addr) (FRRNeighbor, error) {
	out, err := frr.Vtysh(ctx, "show bgp neighbors "+addr.String()+" json")
	if err != nil {
		return FRRNeighbor{}, err
	}
	var m map[string]struct {
		BGPState     string `json:"bgpState"`
		MessageStats struct {
			UpdatesRecv int `json:"updatesRecv"`
		} `json:"messageStats"`
		Established int `json:"connectionsEstablished"`
		Dropped     int `json:"connectionsDropped"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return FRRNeighbor{}, fmt.Errorf("e2e: frr neighbor json: %w", err)
	}
	n, ok := m[addr.String()]
	if !ok {
		return FRRNeighbor{}, fmt.Errorf("e2e: frr has no neighbor %s", addr)
	}
	return FRRNeighbor{State: n.BGPState, UpdatesRecv: n.MessageStats.UpdatesRecv, Established: n.Established, Dropped: n.Dropped}, nil
}

// PathWatch polls a router's paths for a prefix in the background and
// records every poll at which they differed from the expected next hops.
type PathWatch struct {
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	polls  int
	missed []string
}

// WatchPaths starts polling r every interval for prefix via want.
func WatchPaths(ctx context.Context, r netlab.Router, prefix netip.Prefix, interval time.Duration, want ...netip.Addr) *PathWatch {
	w := &PathWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			got, err := NextHops(ctx, r, prefix)
			w.mu.Lock()
			w.polls++
			if err != nil || !sameAddrs(got, want) {
				w.missed = append(w.missed, fmt.Sprintf("%s: %s via %v (%v)", time.Now().Format("15:04:05.000"), prefix, got, err))
			}
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// Stop stops polling and returns how many polls there were and the ones
// that did not see the expected paths.
func (w *PathWatch) Stop() (int, []string) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.polls, w.missed
}

// SetupBFD starts FRR (zebra, bgpd, bfdd) with BFD at interval × mult
// towards every node, creates the matching BFD profile, a BGPPeer using it,
// pool "bgp" and an advertisement of it, allocates one IPv4 address and
// returns FRR and the address's prefix.
func (c *Cluster) SetupBFD(ctx context.Context, interval time.Duration, mult int) (*netlab.FRR, netip.Prefix, error) {
	frr, err := c.StartFRR(ctx, NodeASN, true, &netlab.FRRBFD{Receive: interval, Transmit: interval, Multiplier: mult})
	if err != nil {
		return nil, netip.Prefix{}, err
	}
	steps := []func() error{
		func() error { return c.CreatePool(ctx, "bgp", BGPPoolRanges...) },
		func() error {
			return c.CreateBFDProfile(ctx, "fast", &ipamv1.BFDProfile{
				ReceiveInterval: durationpb.New(interval), TransmitInterval: durationpb.New(interval), DetectMultiplier: uint32(mult),
			})
		},
		func() error {
			p := BGPPeer(FRRAddr4, NodeASN, nil)
			p.BfdProfile = "fast"
			return c.CreateBGPPeer(ctx, "frr", p)
		},
		func() error {
			return c.CreateBGPAdvertisement(ctx, "adv", &ipamv1.BGPAdvertisement{Pools: []string{"pools/bgp"}})
		},
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, netip.Prefix{}, err
		}
	}
	alloc, err := c.Allocate(ctx, "default/api", "bgp", false)
	if err != nil {
		return nil, netip.Prefix{}, err
	}
	addrs, err := Addrs(alloc)
	if err != nil {
		return nil, netip.Prefix{}, err
	}
	return frr, HostPrefix(addrs[0]), nil
}
