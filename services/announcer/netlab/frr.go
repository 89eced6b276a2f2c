package netlab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// FRR binaries, as Debian installs them.
const (
	FRRBgpd  = "/usr/lib/frr/bgpd"
	FRRZebra = "/usr/lib/frr/zebra"
	FRRBfdd  = "/usr/lib/frr/bfdd"
)

// FRRConfig describes an FRR router. The generated configuration uses the
// datacenter defaults and no eBGP policy requirement, so eBGP routes are
// accepted without route maps.
type FRRConfig struct {
	ASN       uint32
	RouterID  netip.Addr
	Neighbors []FRRNeighbor
	// WithZebra runs zebra and bfdd next to bgpd (as the frr user): routes
	// land in the namespace's kernel table and BFD works. Without it bgpd
	// runs alone (-Z), which is faster to start.
	WithZebra bool
	// Extra is appended to the configuration verbatim.
	Extra string
}

// FRRNeighbor is one BGP neighbor of an FRR router.
type FRRNeighbor struct {
	Address   netip.Addr
	ASN       uint32
	Password  string        // TCP-MD5
	Keepalive time.Duration // with HoldTime; zero: FRR's defaults
	HoldTime  time.Duration
	// BFD, when set, configures a BFD peer (needs WithZebra) from
	// LocalAddress to Address with these timers and ties it to the session.
	BFD          *FRRBFD
	LocalAddress netip.Addr
}

// FRRBFD holds BFD timers for FRR's bfdd.
type FRRBFD struct {
	Receive, Transmit time.Duration
	Multiplier        int
}

// FRR is a running FRR router.
type FRR struct {
	host  *Host
	dir   string // vty sockets, pid files
	procs []*Proc
}

// Config renders c as an frr.conf.
func (c FRRConfig) Config() string {
	var b strings.Builder
	b.WriteString("frr defaults datacenter\n!\n")
	var bfd strings.Builder
	for _, n := range c.Neighbors {
		if n.BFD == nil {
			continue
		}
		fmt.Fprintf(&bfd, " peer %s", n.Address)
		if n.LocalAddress.IsValid() {
			fmt.Fprintf(&bfd, " local-address %s", n.LocalAddress)
		}
		fmt.Fprintf(&bfd, "\n  receive-interval %d\n  transmit-interval %d\n  detect-multiplier %d\n !\n",
			n.BFD.Receive.Milliseconds(), n.BFD.Transmit.Milliseconds(), n.BFD.Multiplier)
	}
	if bfd.Len() > 0 {
		b.WriteString("bfd\n")
		b.WriteString(bfd.String())
		b.WriteString("!\n")
	}
	fmt.Fprintf(&b, "router bgp %d\n bgp router-id %s\n no bgp ebgp-requires-policy\n", c.ASN, c.RouterID)
	for _, n := range c.Neighbors {
		fmt.Fprintf(&b, " neighbor %s remote-as %d\n", n.Address, n.ASN)
		if n.Password != "" {
			fmt.Fprintf(&b, " neighbor %s password %s\n", n.Address, n.Password)
		}
		if n.HoldTime > 0 {
			fmt.Fprintf(&b, " neighbor %s timers %d %d\n", n.Address, int(n.Keepalive.Seconds()), int(n.HoldTime.Seconds()))
		}
		if n.BFD != nil {
			fmt.Fprintf(&b, " neighbor %s bfd\n", n.Address)
		}
	}
	b.WriteString(" address-family ipv6 unicast\n")
	for _, n := range c.Neighbors {
		if n.Address.Is6() {
			fmt.Fprintf(&b, "  neighbor %s activate\n", n.Address)
		}
	}
	b.WriteString(" exit-address-family\n!\n")
	b.WriteString(c.Extra)
	return b.String()
}

// StartFRR writes c's configuration and starts FRR in the host's namespace,
// returning once vtysh answers.
func (h *Host) StartFRR(ctx context.Context, c FRRConfig) (*FRR, error) {
	dir := h.Path("frr")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("netlab: frr dir: %w", err)
	}
	conf := filepath.Join(dir, "frr.conf")
	if err := os.WriteFile(conf, []byte(c.Config()), 0o644); err != nil {
		return nil, fmt.Errorf("netlab: frr config: %w", err)
	}
	f := &FRR{host: h, dir: dir}
	common := []string{"-f", conf, "--vty_socket", dir}
	if c.WithZebra {
		if err := chownFRR(dir); err != nil {
			return nil, err
		}
		zserv := filepath.Join(dir, "zserv.api")
		common = append(common, "-u", "frr", "-g", "frr", "-z", zserv)
		for _, d := range []struct{ name, bin string }{{"zebra", FRRZebra}, {"bfdd", FRRBfdd}, {"bgpd", FRRBgpd}} {
			args := append([]string{d.bin}, common...)
			args = append(args, "-i", filepath.Join(dir, d.name+".pid"), "--log", "stdout")
			if d.name == "bgpd" {
				args = append(args, "-P", "0")
			}
			p, err := h.Start(d.name, args, nil)
			if err != nil {
				return nil, err
			}
			f.procs = append(f.procs, p)
			if d.name == "zebra" {
				// bgpd and bfdd connect to zebra's socket at start.
				if err := Eventually(ctx, 10*time.Second, 10*time.Millisecond, func(context.Context) error {
					_, err := os.Stat(zserv)
					return err
				}); err != nil {
					return nil, fmt.Errorf("netlab: zebra did not come up: %w", err)
				}
			}
		}
	} else {
		args := append([]string{FRRBgpd}, common...)
		args = append(args, "-Z", "-S", "-P", "0", "-i", filepath.Join(dir, "bgpd.pid"), "--log", "stdout")
		p, err := h.Start("bgpd", args, nil)
		if err != nil {
			return nil, err
		}
		f.procs = append(f.procs, p)
	}
	if err := Eventually(ctx, 15*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		for _, p := range f.procs {
			if exited, err := p.Exited(); exited {
				return fmt.Errorf("%s exited (%w): %s", p.Name, err, p.Tail(5))
			}
		}
		_, err := f.Vtysh(ctx, "show bgp summary json")
		return err
	}); err != nil {
		return nil, fmt.Errorf("netlab: frr in %s did not come up: %w", h.Role, err)
	}
	return f, nil
}

func chownFRR(dir string) error {
	u, err := user.Lookup("frr")
	if err != nil {
		return fmt.Errorf("netlab: frr user: %w", err)
	}
	g, err := user.LookupGroup("frr")
	if err != nil {
		return fmt.Errorf("netlab: frr group: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(g.Gid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("netlab: %w", err)
	}
	for _, e := range entries {
		if err := os.Chown(filepath.Join(dir, e.Name()), uid, gid); err != nil {
			return fmt.Errorf("netlab: chown: %w", err)
		}
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return fmt.Errorf("netlab: chown: %w", err)
	}
	return nil
}

// Name implements Router.
func (f *FRR) Name() string { return "frr@" + f.host.Role }

// Host is the host FRR runs on.
func (f *FRR) Host() *Host { return f.host }

// Procs are FRR's daemons (bgpd; or zebra, bfdd and bgpd).
func (f *FRR) Procs() []*Proc { return f.procs }

// Vtysh runs vtysh commands in order (configuration commands need
// "configure terminal" first) and returns the output.
func (f *FRR) Vtysh(ctx context.Context, cmds ...string) (string, error) {
	args := []string{"--vty_socket", f.dir}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	full := append([]string{"netns", "exec", f.host.NS, "vtysh"}, args...)
	out, err := exec.CommandContext(ctx, "ip", full...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("netlab: vtysh %q: %w: %s", cmds, err, strings.TrimSpace(string(out)))
	}
	if s := string(out); strings.HasPrefix(s, "%") || strings.Contains(s, "\n%") {
		return s, fmt.Errorf("netlab: vtysh %q: %s", cmds, strings.TrimSpace(s))
	}
	return string(out), nil
}

// NeighborState returns FRR's BGP state for the neighbor ("Established",
// "Active", ...).
func (f *FRR) NeighborState(ctx context.Context, addr netip.Addr) (string, error) {
	out, err := f.Vtysh(ctx, "show bgp neighbors "+addr.String()+" json")
	if err != nil {
		return "", err
	}
	var m map[string]struct {
		BGPState string `json:"bgpState"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return "", fmt.Errorf("netlab: neighbor json: %w", err)
	}
	n, ok := m[addr.String()]
	if !ok {
		return "", fmt.Errorf("netlab: frr has no neighbor %s", addr)
	}
	return n.BGPState, nil
}

// BFDPeer is bfdd's view of one BFD session.
type BFDPeer struct {
	Peer             string `json:"peer"`
	Status           string `json:"status"`
	ReceiveInterval  int    `json:"receive-interval"`
	TransmitInterval int    `json:"transmit-interval"`
	RemoteReceive    int    `json:"remote-receive-interval"`
	RemoteTransmit   int    `json:"remote-transmit-interval"`
	DetectMultiplier int    `json:"detect-multiplier"`
}

// BFDPeers lists bfdd's sessions (needs WithZebra).
func (f *FRR) BFDPeers(ctx context.Context) ([]BFDPeer, error) {
	out, err := f.Vtysh(ctx, "show bfd peers json")
	if err != nil {
		return nil, err
	}
	var peers []BFDPeer
	if err := json.Unmarshal([]byte(out), &peers); err != nil {
		return nil, fmt.Errorf("netlab: bfd json: %w", err)
	}
	return peers, nil
}

// RIB implements Router with `show bgp ipv4|ipv6 unicast json detail`.
func (f *FRR) RIB(ctx context.Context) (RIB, error) {
	rib := RIB{}
	for _, fam := range []string{"ipv4", "ipv6"} {
		out, err := f.Vtysh(ctx, "show bgp "+fam+" unicast json detail")
		if err != nil {
			return nil, err
		}
		if err := parseFRRDetail(out, rib); err != nil {
			return nil, err
		}
	}
	return rib, nil
}

type frrPath struct {
	ASPath *struct {
		String string `json:"string"`
	} `json:"aspath"`
	LocPrf    uint32          `json:"locPrf"`
	Bestpath  json.RawMessage `json:"bestpath"`
	Stale     bool            `json:"stale"`
	Community *struct {
		List []string `json:"list"`
	} `json:"community"`
	LargeCommunity *struct {
		List []string `json:"list"`
	} `json:"largeCommunity"`
	Nexthops []struct {
		IP string `json:"ip"`
	} `json:"nexthops"`
}

func parseFRRDetail(out string, rib RIB) error {
	var doc struct {
		Routes map[string][]frrPath `json:"routes"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return fmt.Errorf("netlab: frr rib json: %w", err)
	}
	for k, paths := range doc.Routes {
		prefix, err := netip.ParsePrefix(k)
		if err != nil {
			return fmt.Errorf("netlab: frr prefix %q: %w", k, err)
		}
		for _, fp := range paths {
			if fp.ASPath == nil && len(fp.Nexthops) == 0 {
				continue // the per-prefix header of "json detail"
			}
			p := Path{Prefix: prefix, LocalPref: fp.LocPrf, Stale: fp.Stale}
			if fp.ASPath != nil && fp.ASPath.String != "Local" {
				p.ASPath = fp.ASPath.String
			}
			if len(fp.Nexthops) > 0 {
				p.NextHop, _ = netip.ParseAddr(fp.Nexthops[0].IP)
			}
			if fp.Community != nil {
				p.Communities = sortedCopy(fp.Community.List)
			}
			if fp.LargeCommunity != nil {
				p.LargeCommunities = sortedCopy(fp.LargeCommunity.List)
			}
			p.Best = frrBest(fp.Bestpath)
			rib[prefix] = append(rib[prefix], p)
		}
	}
	return nil
}

func frrBest(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		return b
	}
	var o struct {
		Overall bool `json:"overall"`
	}
	if err := json.Unmarshal(raw, &o); err == nil {
		return o.Overall
	}
	return false
}
