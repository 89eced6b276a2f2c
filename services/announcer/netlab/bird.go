package netlab

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// BIRDConfig describes a BIRD 2 router. Every neighbor imports and exports
// all routes (explicit filters, as RFC 8212 wants for eBGP); iBGP neighbors
// are direct, with direct gateways, since there is no IGP.
type BIRDConfig struct {
	RouterID  netip.Addr
	ASN       uint32
	Neighbors []BIRDNeighbor
	// BFD holds the timers of the BFD protocol, configured when a neighbor
	// has BFD (nil: 100 ms × 3).
	BFD *FRRBFD
	// Debug, when set, is BIRD's "debug protocols" option for every
	// protocol ("all", "{ states, events }"): the traces land in BIRD's log.
	Debug string
	Extra string
}

// BIRDNeighbor is one BGP neighbor of a BIRD router; its protocol is named
// Name (default n0, n1, ... by position).
type BIRDNeighbor struct {
	Name         string
	Address      netip.Addr
	LocalAddress netip.Addr
	ASN          uint32
	Password     string // TCP-MD5
	// BFD ties the session to a BFD session ("bfd on").
	BFD bool
	// ExportNone sends the neighbor nothing (default: every route).
	ExportNone bool
	// HoldTime, ConnectRetry and ErrorWait (BIRD's "error wait time",
	// minimum and maximum) override BIRD's defaults (240 s, 120 s and
	// 60-300 s) when set. With the default error wait, BIRD keeps a
	// session down for at least a minute after any error, BFD down
	// included.
	HoldTime     time.Duration
	ConnectRetry time.Duration
	ErrorWait    [2]time.Duration
}

// BIRD is a running BIRD 2.
type BIRD struct {
	host *Host
	sock string
	proc *Proc
	cfg  BIRDConfig
}

// Config renders c as a bird.conf.
func (c BIRDConfig) Config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "router id %s;\nlog stderr all;\nprotocol device {}\n", c.RouterID)
	if c.Debug != "" {
		fmt.Fprintf(&b, "debug protocols %s;\n", c.Debug)
	}
	if slices.ContainsFunc(c.Neighbors, func(n BIRDNeighbor) bool { return n.BFD }) {
		t := FRRBFD{Receive: 100 * time.Millisecond, Transmit: 100 * time.Millisecond, Multiplier: 3}
		if c.BFD != nil {
			t = *c.BFD
		}
		fmt.Fprintf(&b, "protocol bfd {\n  interface \"*\" {\n    min rx interval %d ms;\n    min tx interval %d ms;\n    multiplier %d;\n  };\n}\n",
			t.Receive.Milliseconds(), t.Transmit.Milliseconds(), t.Multiplier)
	}
	for i, n := range c.Neighbors {
		name := n.Name
		if name == "" {
			name = fmt.Sprintf("n%d", i)
		}
		fam := "ipv4"
		if n.Address.Is6() {
			fam = "ipv6"
		}
		fmt.Fprintf(&b, "protocol bgp %s {\n  local %s as %d;\n  neighbor %s as %d;\n", name, n.LocalAddress, c.ASN, n.Address, n.ASN)
		if n.Password != "" {
			fmt.Fprintf(&b, "  password %q;\n", n.Password)
		}
		if n.HoldTime > 0 {
			fmt.Fprintf(&b, "  hold time %d;\n", int(n.HoldTime.Seconds()))
		}
		if n.ConnectRetry > 0 {
			fmt.Fprintf(&b, "  connect retry time %d;\n", int(n.ConnectRetry.Seconds()))
		}
		if n.ErrorWait[1] > 0 {
			fmt.Fprintf(&b, "  error wait time %d,%d;\n", int(n.ErrorWait[0].Seconds()), int(n.ErrorWait[1].Seconds()))
		}
		if n.BFD {
			b.WriteString("  bfd on;\n")
		}
		gw := ""
		if n.ASN == c.ASN {
			b.WriteString("  direct;\n")
			gw = " gateway direct;"
		}
		export := "all"
		if n.ExportNone {
			export = "none"
		}
		fmt.Fprintf(&b, "  %s { import all; export %s;%s };\n}\n", fam, export, gw)
	}
	b.WriteString(c.Extra)
	return b.String()
}

// StartBIRD writes c's configuration and starts BIRD in the host's
// namespace, returning once birdc answers.
func (h *Host) StartBIRD(ctx context.Context, c BIRDConfig) (*BIRD, error) {
	conf := h.Path("bird.conf")
	if err := os.WriteFile(conf, []byte(c.Config()), 0o644); err != nil {
		return nil, fmt.Errorf("netlab: bird config: %w", err)
	}
	sock := h.Path("bird.ctl")
	p, err := h.Start("bird", []string{"bird", "-f", "-c", conf, "-s", sock, "-P", h.Path("bird.pid")}, nil)
	if err != nil {
		return nil, err
	}
	b := &BIRD{host: h, sock: sock, proc: p, cfg: c}
	if err := Eventually(ctx, 10*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("bird exited (%w): %s", err, p.Tail(5))
		}
		_, err := b.Birdc(ctx, "show", "status")
		return err
	}); err != nil {
		return nil, fmt.Errorf("netlab: bird in %s did not come up: %w", h.Role, err)
	}
	return b, nil
}

// Name implements Router.
func (b *BIRD) Name() string { return "bird@" + b.host.Role }

// Proc is BIRD's process.
func (b *BIRD) Proc() *Proc { return b.proc }

// Birdc runs one birdc command and returns its output.
func (b *BIRD) Birdc(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "birdc", append([]string{"-s", b.sock}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("netlab: birdc %v: %w: %s", args, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// ProtocolInfo returns the Info column of `show protocols` for a neighbor's
// protocol ("Established", "Active", ...).
func (b *BIRD) ProtocolInfo(ctx context.Context, name string) (string, error) {
	out, err := b.Birdc(ctx, "show", "protocols", name)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[0] == name {
			return f[5], nil
		}
		if len(f) == 5 && f[0] == name {
			return f[3], nil
		}
	}
	return "", fmt.Errorf("netlab: bird has no protocol %s: %s", name, out)
}

// RIB implements Router with `birdc show route all`.
func (b *BIRD) RIB(ctx context.Context) (RIB, error) {
	out, err := b.Birdc(ctx, "show", "route", "all")
	if err != nil {
		return nil, err
	}
	return parseBIRDRoutes(out)
}

// parseBIRDRoutes reads `show route all`: a route line starts at column 0
// with its prefix (or with spaces, for another route to the same prefix),
// its attributes follow on tab-indented lines.
func parseBIRDRoutes(out string) (RIB, error) {
	rib := RIB{}
	var cur *Path
	var prefix netip.Prefix
	flush := func() {
		if cur != nil {
			rib[cur.Prefix] = append(rib[cur.Prefix], *cur)
			cur = nil
		}
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" || strings.HasPrefix(line, "BIRD ") || strings.HasPrefix(line, "Table "):
			flush()
		case strings.HasPrefix(line, "\t"):
			if cur == nil {
				continue
			}
			parseBIRDAttr(strings.TrimSpace(line), cur)
		default:
			flush()
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			if !strings.HasPrefix(line, " ") {
				p, err := netip.ParsePrefix(f[0])
				if err != nil {
					return nil, fmt.Errorf("netlab: bird route line %q: %w", line, err)
				}
				prefix = p
			}
			cur = &Path{Prefix: prefix}
			for _, x := range f {
				if x == "*" {
					cur.Best = true
				}
			}
		}
	}
	flush()
	return rib, sc.Err()
}

func parseBIRDAttr(line string, p *Path) {
	k, v, ok := strings.Cut(line, ":")
	if !ok {
		return
	}
	v = strings.TrimSpace(v)
	switch k {
	case "BGP.as_path":
		p.ASPath = v
	case "BGP.next_hop":
		if f := strings.Fields(v); len(f) > 0 {
			p.NextHop, _ = netip.ParseAddr(f[0])
		}
	case "BGP.local_pref":
		n, _ := strconv.ParseUint(v, 10, 32)
		p.LocalPref = uint32(n)
	case "BGP.community":
		p.Communities = sortedCopy(birdTuples(v, ":"))
	case "BGP.large_community":
		p.LargeCommunities = sortedCopy(birdTuples(v, ":"))
	}
}

// birdTuples turns "(65000,100) (65000,200)" or "(1, 2, 3)" into
// ["65000:100", "65000:200"] or ["1:2:3"].
func birdTuples(v, sep string) []string {
	var out []string
	for _, t := range strings.Split(v, ")") {
		t = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(t), "("))
		if t == "" {
			continue
		}
		parts := strings.Split(t, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		out = append(out, strings.Join(parts, sep))
	}
	return out
}
