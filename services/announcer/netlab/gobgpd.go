package netlab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"
	"time"
)

// gobgpdAPI is gobgpd's gRPC address inside its own namespace: each
// namespace has its own loopback, so the fixed port never collides.
const gobgpdAPI = "127.0.0.1:50051"

// GoBGPdConfig describes a gobgpd router (it listens on port 179 and accepts
// everything by default).
type GoBGPdConfig struct {
	ASN       uint32
	RouterID  netip.Addr
	Neighbors []GoBGPdNeighbor
}

// GoBGPdNeighbor is one neighbor of a gobgpd router.
type GoBGPdNeighbor struct {
	Address  netip.Addr
	ASN      uint32
	Password string
}

// GoBGPd is a running gobgpd.
type GoBGPd struct {
	host *Host
	proc *Proc
}

// Config renders c as gobgpd TOML.
func (c GoBGPdConfig) Config() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[global.config]\n  as = %d\n  router-id = %q\n\n", c.ASN, c.RouterID)
	for _, n := range c.Neighbors {
		fmt.Fprintf(&b, "[[neighbors]]\n  [neighbors.config]\n    neighbor-address = %q\n    peer-as = %d\n", n.Address, n.ASN)
		if n.Password != "" {
			fmt.Fprintf(&b, "    auth-password = %q\n", n.Password)
		}
		fam := "ipv4-unicast"
		if n.Address.Is6() {
			fam = "ipv6-unicast"
		}
		fmt.Fprintf(&b, "  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      afi-safi-name = %q\n\n", fam)
	}
	return b.String()
}

// StartGoBGPd writes c's configuration and starts gobgpd in the host's
// namespace, returning once the gobgp CLI answers.
func (h *Host) StartGoBGPd(ctx context.Context, c GoBGPdConfig) (*GoBGPd, error) {
	conf := h.Path("gobgpd.toml")
	if err := os.WriteFile(conf, []byte(c.Config()), 0o644); err != nil {
		return nil, fmt.Errorf("netlab: gobgpd config: %w", err)
	}
	p, err := h.Start("gobgpd", []string{"gobgpd", "-f", conf, "-p", "--api-hosts", gobgpdAPI, "--pprof-disable"}, nil)
	if err != nil {
		return nil, err
	}
	g := &GoBGPd{host: h, proc: p}
	if err := Eventually(ctx, 10*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("gobgpd exited (%w): %s", err, p.Tail(5))
		}
		_, err := g.CLI(ctx, "global")
		return err
	}); err != nil {
		return nil, fmt.Errorf("netlab: gobgpd in %s did not come up: %w", h.Role, err)
	}
	return g, nil
}

// Name implements Router.
func (g *GoBGPd) Name() string { return "gobgpd@" + g.host.Role }

// Proc is gobgpd's process.
func (g *GoBGPd) Proc() *Proc { return g.proc }

// CLI runs the gobgp command line inside gobgpd's namespace.
func (g *GoBGPd) CLI(ctx context.Context, args ...string) (string, error) {
	return g.host.Run(ctx, "gobgp", append([]string{"-u", "127.0.0.1", "-p", "50051"}, args...)...)
}

// NeighborState returns gobgpd's session state for the neighbor
// ("established", "active", ...).
func (g *GoBGPd) NeighborState(ctx context.Context, addr netip.Addr) (string, error) {
	out, err := g.CLI(ctx, "neighbor", addr.String(), "-j")
	if err != nil {
		return "", err
	}
	var n struct {
		State struct {
			SessionState any `json:"session_state"`
		} `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &n); err != nil {
		return "", fmt.Errorf("netlab: gobgp neighbor json: %w", err)
	}
	return strings.ToLower(fmt.Sprint(n.State.SessionState)), nil
}

// RIB implements Router with `gobgp global rib -j` for both families.
func (g *GoBGPd) RIB(ctx context.Context) (RIB, error) {
	rib := RIB{}
	for _, fam := range []string{"ipv4", "ipv6"} {
		out, err := g.CLI(ctx, "global", "rib", "-a", fam, "-j")
		if err != nil {
			return nil, err
		}
		if err := parseGoBGPRIB(out, rib); err != nil {
			return nil, err
		}
	}
	return rib, nil
}

type gobgpAttr struct {
	Type        int             `json:"type"`
	Value       json.RawMessage `json:"value"`
	Nexthop     string          `json:"nexthop"`
	Communities []uint32        `json:"communities"`
	ASPaths     []struct {
		ASNs []uint32 `json:"asns"`
	} `json:"as_paths"`
}

func parseGoBGPRIB(out string, rib RIB) error {
	var doc map[string][]struct {
		Best  bool        `json:"best"`
		Stale bool        `json:"stale"`
		Attrs []gobgpAttr `json:"attrs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return fmt.Errorf("netlab: gobgp rib json: %w: %s", err, out)
	}
	for k, paths := range doc {
		prefix, err := netip.ParsePrefix(k)
		if err != nil {
			return fmt.Errorf("netlab: gobgp prefix %q: %w", k, err)
		}
		for _, gp := range paths {
			p := Path{Prefix: prefix, Best: gp.Best, Stale: gp.Stale}
			for _, a := range gp.Attrs {
				switch a.Type {
				case 2: // AS_PATH
					var asns []string
					for _, seg := range a.ASPaths {
						for _, n := range seg.ASNs {
							asns = append(asns, fmt.Sprint(n))
						}
					}
					p.ASPath = strings.Join(asns, " ")
				case 3, 14: // NEXT_HOP, MP_REACH_NLRI
					p.NextHop, _ = netip.ParseAddr(a.Nexthop)
				case 5: // LOCAL_PREF
					var v uint32
					_ = json.Unmarshal(a.Value, &v)
					p.LocalPref = v
				case 8: // COMMUNITIES
					for _, c := range a.Communities {
						p.Communities = append(p.Communities, fmt.Sprintf("%d:%d", c>>16, c&0xffff))
					}
					sort.Strings(p.Communities)
				case 32: // LARGE_COMMUNITY
					var lcs []struct {
						ASN        uint32 `json:"ASN"`
						LocalData1 uint32 `json:"LocalData1"`
						LocalData2 uint32 `json:"LocalData2"`
					}
					_ = json.Unmarshal(a.Value, &lcs)
					for _, c := range lcs {
						p.LargeCommunities = append(p.LargeCommunities, fmt.Sprintf("%d:%d:%d", c.ASN, c.LocalData1, c.LocalData2))
					}
					sort.Strings(p.LargeCommunities)
				}
			}
			rib[prefix] = append(rib[prefix], p)
		}
	}
	return nil
}
