package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/internal/ipamclient"
)

// defaultConnectRetry is how soon the speaker retries a peer it could not
// reach when the BGPPeer sets no connect time. The speaker does not listen,
// so GoBGP's 120 s default would leave a node without routes for minutes
// after a router restart.
const defaultConnectRetry = 5 * time.Second

// parseStandard parses "A:B" into A<<16|B.
func parseStandard(s string) (uint32, error) {
	a, b, ok := strings.Cut(s, ":")
	x, err1 := strconv.ParseUint(a, 10, 16)
	y, err2 := strconv.ParseUint(b, 10, 16)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("community %q is not A:B", s)
	}
	return uint32(x)<<16 | uint32(y), nil
}

// parseLarge parses "A:B:C".
func parseLarge(s string) ([3]uint32, error) {
	var out [3]uint32
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return out, fmt.Errorf("large community %q is not A:B:C", s)
	}
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return out, fmt.Errorf("large community %q is not A:B:C", s)
		}
		out[i] = uint32(v)
	}
	return out, nil
}

func duration(d interface{ AsDuration() time.Duration }) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

// peerConfig converts a planned peer; readFile reads password files.
func peerConfig(pp *ipamv1.PlanPeer, readFile func(string) ([]byte, error)) (bgp.PeerConfig, error) {
	p := pp.GetPeer()
	addr, err := netip.ParseAddr(p.GetPeerAddress())
	if err != nil {
		return bgp.PeerConfig{}, fmt.Errorf("peer %s: address %q: %w", p.GetName(), p.GetPeerAddress(), err)
	}
	c := bgp.PeerConfig{
		Name: p.GetName(), MyASN: p.GetMyAsn(), PeerASN: p.GetPeerAsn(), Address: addr, Port: uint16(p.GetPeerPort()),
		Password: p.GetPassword(), EBGPMultihop: p.GetEbgpMultihop(), GracefulRestart: p.GetGracefulRestart(),
	}
	if p.GetHoldTime() != nil {
		c.HoldTime = duration(p.GetHoldTime())
	}
	if p.GetKeepaliveTime() != nil {
		c.KeepaliveTime = duration(p.GetKeepaliveTime())
	}
	c.ConnectRetry = defaultConnectRetry
	if p.GetConnectTime() != nil {
		c.ConnectRetry = duration(p.GetConnectTime())
	}
	if s := p.GetSourceAddress(); s != "" {
		if c.SourceAddress, err = netip.ParseAddr(s); err != nil {
			return bgp.PeerConfig{}, fmt.Errorf("peer %s: source address %q: %w", p.GetName(), s, err)
		}
	}
	if f := p.GetPasswordFile(); f != "" {
		b, err := readFile(f)
		if err != nil {
			return bgp.PeerConfig{}, fmt.Errorf("peer %s: password file: %w", p.GetName(), err)
		}
		c.Password = strings.TrimRight(string(b), "\r\n")
	}
	if b := pp.GetBfd(); b != nil {
		c.BFD = &bgp.BFDConfig{
			RxInterval: duration(b.GetReceiveInterval()), TxInterval: duration(b.GetTransmitInterval()),
			DetectMultiplier: b.GetDetectMultiplier(), Passive: b.GetPassiveMode(),
		}
	}
	return c, nil
}

// BGPDesired converts a plan's peers and routes for the speaker. Entries
// that cannot be used are left out and reported; the rest still apply.
func BGPDesired(plan *ipamclient.Plan, readFile func(string) ([]byte, error)) ([]bgp.PeerConfig, []bgp.Route, []error) {
	if plan == nil {
		return nil, nil, nil
	}
	var errs []error
	peers := make([]bgp.PeerConfig, 0, len(plan.Peers))
	ok := map[string]bool{}
	for _, pp := range plan.Peers {
		c, err := peerConfig(pp, readFile)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		peers = append(peers, c)
		ok[c.Name] = true
	}
	slices.SortFunc(peers, func(a, b bgp.PeerConfig) int { return strings.Compare(a.Name, b.Name) })
	routes := make([]bgp.Route, 0, len(plan.Routes))
	for k, r := range plan.Routes {
		if !ok[k.Peer] {
			continue
		}
		rt := bgp.Route{Prefix: k.Prefix, Peer: k.Peer, LocalPref: r.GetLocalPref(), MED: r.GetMed(), ASPathPrepend: r.GetAsPathPrepend()}
		for _, s := range r.GetCommunities() {
			c, err := parseStandard(s)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			rt.Communities = append(rt.Communities, c)
		}
		for _, s := range r.GetLargeCommunities() {
			c, err := parseLarge(s)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			rt.LargeCommunities = append(rt.LargeCommunities, c)
		}
		routes = append(routes, rt)
	}
	slices.SortFunc(routes, func(a, b bgp.Route) int {
		if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
			return c
		}
		return strings.Compare(a.Peer, b.Peer)
	})
	return peers, routes, errs
}

// refusalLog logs the parts of BGP plans that the reconciler or the speaker
// refused, each once while it lasts: a refusal that the next plan repeats
// (with the same message) is not logged again, one that goes away and
// comes back is. Failures of GoBGP itself are logged every time.
type refusalLog struct {
	last map[string]bool
}

// log logs the plan's conversion errors and the speaker's Apply error.
func (l *refusalLog) log(ctx context.Context, logger *slog.Logger, convert []error, apply error) {
	next := map[string]bool{}
	for _, err := range convert {
		msg := err.Error()
		if !l.last[msg] && !next[msg] {
			logger.WarnContext(ctx, "ignoring part of the BGP plan", "error", err)
		}
		next[msg] = true
	}
	for _, err := range leaves(apply) {
		if !bgp.IsRefusal(err) {
			logger.WarnContext(ctx, "applying the BGP plan failed", "error", err)
			continue
		}
		msg := err.Error()
		if !l.last[msg] && !next[msg] {
			logger.WarnContext(ctx, "the BGP speaker refused part of the plan", "error", err)
		}
		next[msg] = true
	}
	l.last = next
}

// leaves flattens errors.Join trees into their leaves.
func leaves(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, leaves(e)...)
	}
	return out
}
