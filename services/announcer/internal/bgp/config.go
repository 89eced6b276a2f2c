package bgp

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options configure a Speaker.
type Options struct {
	// RouterID is the speaker's BGP identifier, an IPv4 address (required;
	// GoBGP has one identifier per speaker).
	RouterID netip.Addr
	// ASN is GoBGP's global AS number. Every peer speaks its own MyASN, so
	// this only matters to GoBGP itself; 0 means 64512.
	ASN uint32
	// ListenPort is the TCP port to accept BGP sessions on. 0 and -1 (the
	// default) mean do not listen: the speaker connects out to its peers.
	ListenPort int32
	// KeepRoutesOnExit makes Run end its sessions without a NOTIFICATION,
	// so peers that negotiated graceful restart keep the routes (as stale)
	// for the restart time: for a planned restart of the process. By default
	// Run withdraws everything and sends a Cease on exit.
	KeepRoutesOnExit bool
	// PollInterval is how often Run refreshes BFD states and counters for
	// Sessions (default one second). Session state changes are pushed at
	// once regardless.
	PollInterval time.Duration
	// GoBGPLogLevel is the lowest level of GoBGP's own log records that
	// reach the logger (nil: warnings and errors).
	GoBGPLogLevel slog.Leveler
}

// PeerConfig is one BGP neighbor. Name is its identity; any other change
// re-creates the session.
type PeerConfig struct {
	Name            string // key, e.g. "tenants/c1/bgpPeers/r1"
	MyASN, PeerASN  uint32
	Address         netip.Addr
	Port            uint16     // 0: 179
	SourceAddress   netip.Addr // optional local address
	RouterID        netip.Addr // optional; must equal the speaker's (GoBGP has one)
	HoldTime        time.Duration
	KeepaliveTime   time.Duration // 0: HoldTime/3
	ConnectRetry    time.Duration // 0: 120 s
	Password        string        // TCP-MD5, optional
	EBGPMultihop    bool
	GracefulRestart bool
	RestartTime     time.Duration // with GracefulRestart; 0: the hold time
	BFD             *BFDConfig    // nil: off
}

// BFDConfig turns on BFD for a peer. Zero values take GoBGP's defaults
// (one second, multiplier 3).
type BFDConfig struct {
	RxInterval, TxInterval time.Duration
	DetectMultiplier       uint32
	// Passive is accepted for compatibility with MetalLB's BFD profiles;
	// GoBGP v4 has no passive mode, so the session always runs active.
	Passive bool
}

// Route is one prefix advertised to one peer with its own attributes.
type Route struct {
	Prefix           netip.Prefix
	Peer             string      // PeerConfig.Name
	Communities      []uint32    // standard, A<<16 | B
	LargeCommunities [][3]uint32 // global administrator, local data 1, local data 2
	LocalPref        uint32      // 0: not set (iBGP peers then get 100); only iBGP carries it
	MED              uint32      // 0: not sent
	ASPathPrepend    uint32      // times the peer's MyASN is prepended; 0: none; eBGP only (an iBGP peer would drop a path with its own AS)
}

// SessionState is what the speaker knows of one peer's session.
type SessionState struct {
	Peer       string // PeerConfig.Name
	State      string // idle, connect, active, opensent, openconfirm, established
	BFDUp      bool
	Since      time.Time // when State last changed
	Advertised int       // prefixes sent to the peer
	Received   int       // prefixes the peer sent (all rejected by the import policy)
	// Prefixes are the prefixes GoBGP's adj-RIB-out holds for the peer
	// while the session is established: what the export policy gives it in
	// the families the session carries, sorted. A route Apply refused is
	// never among them. Empty while the session is not established.
	Prefixes []netip.Prefix `json:",omitempty"`
}

// Session states, as GoBGP names them.
const (
	StateIdle        = "idle"
	StateConnect     = "connect"
	StateActive      = "active"
	StateOpenSent    = "opensent"
	StateOpenConfirm = "openconfirm"
	StateEstablished = "established"
)

// defaults fills zero values.
func (o Options) withDefaults() Options {
	if o.ASN == 0 {
		o.ASN = 64512
	}
	if o.ListenPort == 0 {
		o.ListenPort = -1
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.GoBGPLogLevel == nil {
		o.GoBGPLogLevel = slog.LevelWarn
	}
	return o
}

// attrs are the attributes one peer gets with one prefix, in a canonical
// form (sorted, no duplicates) so that equal sets compare equal.
type attrs struct {
	communities []uint32
	large       [][3]uint32
	localPref   uint32
	med         uint32
	prepend     uint32
}

func newAttrs(r Route) attrs {
	a := attrs{localPref: r.LocalPref, med: r.MED, prepend: r.ASPathPrepend}
	if len(r.Communities) > 0 {
		a.communities = slices.Compact(slices.Sorted(slices.Values(r.Communities)))
	}
	if len(r.LargeCommunities) > 0 {
		l := slices.Clone(r.LargeCommunities)
		slices.SortFunc(l, func(x, y [3]uint32) int {
			return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1]), cmp.Compare(x[2], y[2]))
		})
		a.large = slices.Compact(l)
	}
	return a
}

// key is a canonical string for grouping and comparing attribute sets.
func (a attrs) key() string {
	var b strings.Builder
	b.WriteString("c")
	for _, c := range a.communities {
		b.WriteByte(' ')
		b.WriteString(communityString(c))
	}
	b.WriteString("|l")
	for _, l := range a.large {
		fmt.Fprintf(&b, " %d:%d:%d", l[0], l[1], l[2])
	}
	b.WriteString("|p ")
	b.WriteString(strconv.FormatUint(uint64(a.localPref), 10))
	if a.med != 0 || a.prepend != 0 {
		fmt.Fprintf(&b, "|m %d|a %d", a.med, a.prepend)
	}
	return b.String()
}

func communityString(c uint32) string {
	return strconv.FormatUint(uint64(c>>16), 10) + ":" + strconv.FormatUint(uint64(c&0xffff), 10)
}

// plan is a validated desired state.
type plan struct {
	peers   map[string]PeerConfig             // by name
	adverts map[netip.Prefix]map[string]attrs // prefix -> peer name -> attributes
}

func emptyPlan() plan {
	return plan{peers: map[string]PeerConfig{}, adverts: map[netip.Prefix]map[string]attrs{}}
}

// newPlan validates peers and routes against the speaker's options. It
// keeps everything valid and returns one error per thing it left out.
func newPlan(opts Options, peers []PeerConfig, routes []Route) (plan, error) {
	p := emptyPlan()
	var errs []error
	byAddr := map[netip.Addr]string{}
	for _, pc := range peers {
		if err := validatePeer(opts, pc); err != nil {
			errs = append(errs, fmt.Errorf("peer %q: %w", pc.Name, err))
			continue
		}
		if _, dup := p.peers[pc.Name]; dup {
			errs = append(errs, fmt.Errorf("peer %q: %w", pc.Name, ErrDuplicatePeer))
			continue
		}
		if other, dup := byAddr[pc.Address]; dup {
			errs = append(errs, fmt.Errorf("peer %q: address %s is also peer %q: %w", pc.Name, pc.Address, other, ErrDuplicatePeer))
			continue
		}
		byAddr[pc.Address] = pc.Name
		p.peers[pc.Name] = normalizePeer(pc)
	}
	for _, r := range routes {
		pc, ok := p.peers[r.Peer]
		switch {
		case !r.Prefix.IsValid():
			errs = append(errs, fmt.Errorf("route %s to %q: %w: invalid prefix", r.Prefix, r.Peer, ErrInvalidRoute))
			continue
		case r.Prefix != r.Prefix.Masked():
			errs = append(errs, fmt.Errorf("route %s to %q: %w: host bits set (want %s)", r.Prefix, r.Peer, ErrInvalidRoute, r.Prefix.Masked()))
			continue
		case r.Prefix.Addr().Is4In6() || r.Prefix.Addr().Zone() != "":
			errs = append(errs, fmt.Errorf("route %s to %q: %w: mapped or zoned address", r.Prefix, r.Peer, ErrInvalidRoute))
			continue
		case !ok:
			errs = append(errs, fmt.Errorf("route %s to %q: %w", r.Prefix, r.Peer, ErrUnknownPeer))
			continue
		case r.Prefix.Addr().Is4() != pc.Address.Is4():
			errs = append(errs, fmt.Errorf("route %s to %q (%s): %w", r.Prefix, r.Peer, pc.Address, ErrFamilyMismatch))
			continue
		}
		a := newAttrs(r)
		byPeer := p.adverts[r.Prefix]
		if byPeer == nil {
			byPeer = map[string]attrs{}
			p.adverts[r.Prefix] = byPeer
		}
		if old, dup := byPeer[r.Peer]; dup {
			if old.key() != a.key() {
				errs = append(errs, fmt.Errorf("route %s to %q: %w: %s and %s", r.Prefix, r.Peer, ErrConflictingRoute, old.key(), a.key()))
			}
			continue
		}
		byPeer[r.Peer] = a
	}
	return p, errors.Join(errs...)
}

// Errors Apply wraps, one per thing it refused.
var (
	ErrInvalidPeer      = errors.New("invalid peer")
	ErrDuplicatePeer    = errors.New("duplicate peer")
	ErrInvalidRoute     = errors.New("invalid route")
	ErrUnknownPeer      = errors.New("route for an unknown or refused peer")
	ErrFamilyMismatch   = errors.New("route family differs from the peer's address family")
	ErrConflictingRoute = errors.New("same prefix to the same peer with different attributes")
)

// IsRefusal reports whether err is one of Apply's refusals (of a peer or a
// route it cannot use), as opposed to a failure of GoBGP.
func IsRefusal(err error) bool {
	for _, r := range []error{ErrInvalidPeer, ErrDuplicatePeer, ErrInvalidRoute, ErrUnknownPeer, ErrFamilyMismatch, ErrConflictingRoute} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

func validatePeer(opts Options, pc PeerConfig) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidPeer, fmt.Sprintf(format, args...))
	}
	switch {
	case pc.Name == "":
		return bad("no name")
	case !pc.Address.IsValid() || pc.Address.IsUnspecified() || pc.Address.Is4In6():
		return bad("address %q", pc.Address)
	case pc.Address.Zone() != "":
		return bad("zoned address %s (link-local peers are not supported)", pc.Address)
	case pc.MyASN == 0 || pc.PeerASN == 0:
		return bad("an AS number is zero (my %d, peer %d)", pc.MyASN, pc.PeerASN)
	case pc.SourceAddress.IsValid() && pc.SourceAddress.Is4() != pc.Address.Is4():
		return bad("source address %s and address %s differ in family", pc.SourceAddress, pc.Address)
	case pc.RouterID.IsValid() && pc.RouterID != opts.RouterID:
		return bad("router ID %s differs from the speaker's %s (GoBGP has one per speaker)", pc.RouterID, opts.RouterID)
	case pc.HoldTime != 0 && pc.HoldTime < 3*time.Second:
		return bad("hold time %v: 0 or at least 3s", pc.HoldTime)
	case pc.HoldTime%time.Second != 0 || pc.KeepaliveTime%time.Second != 0 || pc.ConnectRetry%time.Second != 0 || pc.RestartTime%time.Second != 0:
		return bad("BGP timers are whole seconds")
	case pc.KeepaliveTime < 0 || pc.ConnectRetry < 0 || pc.RestartTime < 0:
		return bad("negative timer")
	case pc.KeepaliveTime != 0 && pc.HoldTime != 0 && pc.KeepaliveTime >= pc.HoldTime:
		return bad("keepalive %v is not below hold time %v", pc.KeepaliveTime, pc.HoldTime)
	case pc.RestartTime > 4095*time.Second:
		return bad("restart time %v above 4095s", pc.RestartTime)
	}
	if b := pc.BFD; b != nil {
		switch {
		case b.DetectMultiplier > 255:
			return bad("BFD detect multiplier %d above 255", b.DetectMultiplier)
		case b.RxInterval < 0 || b.TxInterval < 0:
			return bad("negative BFD interval")
		case b.RxInterval%time.Microsecond != 0 || b.TxInterval%time.Microsecond != 0:
			return bad("BFD intervals are whole microseconds")
		case b.RxInterval > time.Duration(1<<32-1)*time.Microsecond || b.TxInterval > time.Duration(1<<32-1)*time.Microsecond:
			return bad("BFD interval too long")
		}
	}
	return nil
}

// normalizePeer makes equal configurations compare equal: defaults filled
// in, the BFD settings copied.
func normalizePeer(pc PeerConfig) PeerConfig {
	if pc.Port == 0 {
		pc.Port = 179
	}
	if pc.HoldTime == 0 {
		pc.HoldTime = 90 * time.Second
	}
	if pc.KeepaliveTime == 0 {
		pc.KeepaliveTime = (pc.HoldTime / 3).Truncate(time.Second)
	}
	if pc.ConnectRetry == 0 {
		pc.ConnectRetry = 120 * time.Second
	}
	if pc.GracefulRestart && pc.RestartTime == 0 {
		pc.RestartTime = pc.HoldTime
	}
	if !pc.GracefulRestart {
		pc.RestartTime = 0
	}
	pc.RouterID = netip.Addr{}
	if pc.BFD != nil {
		b := *pc.BFD
		if b.RxInterval == 0 {
			b.RxInterval = time.Second
		}
		if b.TxInterval == 0 {
			b.TxInterval = time.Second
		}
		if b.DetectMultiplier == 0 {
			b.DetectMultiplier = 3
		}
		pc.BFD = &b
	}
	return pc
}

// samePeer reports whether two normalized configurations are equal.
func samePeer(a, b PeerConfig) bool {
	ab, bb := a.BFD, b.BFD
	a.BFD, b.BFD = nil, nil
	if a != b {
		return false
	}
	if (ab == nil) != (bb == nil) {
		return false
	}
	return ab == nil || *ab == *bb
}
