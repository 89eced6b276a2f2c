package planner

import (
	"cmp"
	"math"
	"net/netip"
	"slices"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// noTier is the L2 priority of a node that matches none of an
// advertisement's node priorities: the last tier.
const noTier = math.MaxInt

// compiled is an Input prepared for planning: everything sorted by ID or
// name, every node selector evaluated once per node, and caches for the
// results that many addresses share. It lives for one call and is used by one
// goroutine.
type compiled struct {
	in *Input

	nodes    []*ipam.Node // by name
	nodeIdx  map[string]int
	active   []bool   // live and not draining: may announce
	nodeKeys []uint64 // rendezvous keys

	l2      []*l2Ad  // by ID
	bgp     []*bgpAd // by ID
	peers   []*peerInfo
	peerIdx map[string]int
	// peerAds[p] is the set of BGP advertisements that announce to peer p.
	peerAds []bitset
	// aliases maps community alias names to values; the first definition,
	// in Community ID order, wins.
	aliases map[string]string

	poolPrefixes map[string][]netip.Prefix
	tierCache    map[string]*tierSet
	attrCache    map[attrKey]ipam.PlanRoute
}

// adSelection is the pool and owner selection an advertisement makes.
type adSelection struct {
	pools     []string
	poolSels  []selector.Selector
	ownerSels []selector.Selector
	byPool    map[string]bool // cache of poolSelected
}

// l2Ad is a compiled L2Advertisement.
type l2Ad struct {
	ad  *ipam.L2Advertisement
	sel adSelection
	// match[n]: the node selectors select node n.
	match []bool
	// usable[n]: node n is active, selected, and has an Up interface among
	// the advertisement's interfaces (any interface when none are named).
	usable []bool
	// tier[n]: the best node priority of node n; noTier when none matches.
	tier []int
	// ifaces are the advertisement's interfaces, sorted; nil: all.
	ifaces []string
}

// bgpAd is a compiled BGPAdvertisement.
type bgpAd struct {
	ad    *ipam.BGPAdvertisement
	sel   adSelection
	match []bool // match[n]: the node selectors select node n
	// peers are the indexes of the known peers announced to.
	peers      []int
	comms      []uint32    // sorted, unique; unparsable ones dropped
	large      [][3]uint32 // sorted, unique
	agg4, agg6 int         // effective aggregation lengths
}

// peerInfo is a compiled BGPPeer.
type peerInfo struct {
	p     *ipam.BGPPeer
	bfd   *ipam.BFDProfile
	match []bool // match[n]: the peer's node selectors select node n
	ibgp  bool   // LOCAL_PREF applies
	// v4, v6: the session carries IPv4, IPv6 unicast routes; the session's
	// family is its peer address's.
	v4, v6 bool
}

// carries reports whether the peer's session carries routes of p's family.
func (pi *peerInfo) carries(p netip.Prefix) bool {
	if p.Addr().Is4() {
		return pi.v4
	}
	return pi.v6
}

// compile prepares in. Cost: O(N log N + N·(L+B+P)) selector evaluations
// plus sorting the configuration.
func compile(in *Input) *compiled {
	c := &compiled{
		in:           in,
		nodeIdx:      make(map[string]int, len(in.Nodes)),
		peerIdx:      make(map[string]int, len(in.Peers)),
		aliases:      map[string]string{},
		poolPrefixes: map[string][]netip.Prefix{},
		tierCache:    map[string]*tierSet{},
		attrCache:    map[attrKey]ipam.PlanRoute{},
	}
	c.nodes = slices.Clone(in.Nodes)
	slices.SortFunc(c.nodes, func(a, b *ipam.Node) int { return strings.Compare(a.Name, b.Name) })
	c.active = make([]bool, len(c.nodes))
	c.nodeKeys = make([]uint64, len(c.nodes))
	for i, n := range c.nodes {
		c.nodeIdx[n.Name] = i
		c.active[i] = n.Live && !n.Draining
		c.nodeKeys[i] = nodeKey(n.Name)
	}

	comms := slices.Clone(in.Communities)
	slices.SortFunc(comms, func(a, b *ipam.Community) int { return strings.Compare(a.ID, b.ID) })
	for _, cm := range comms {
		for _, al := range cm.Aliases {
			if _, ok := c.aliases[al.Name]; !ok {
				c.aliases[al.Name] = al.Value
			}
		}
	}

	peers := slices.Clone(in.Peers)
	slices.SortFunc(peers, func(a, b *ipam.BGPPeer) int { return strings.Compare(a.ID, b.ID) })
	for i, p := range peers {
		c.peerIdx[p.ID] = i
		a := p.PeerAddress.Unmap()
		pi := &peerInfo{p: p, match: c.matchNodes(p.NodeSelectors), ibgp: p.MyASN == p.PeerASN, v4: a.Is4(), v6: a.Is6()}
		if p.BFDProfile != "" {
			pi.bfd = in.BFD[p.BFDProfile]
		}
		c.peers = append(c.peers, pi)
	}

	l2 := slices.Clone(in.L2)
	slices.SortFunc(l2, func(a, b *ipam.L2Advertisement) int { return strings.Compare(a.ID, b.ID) })
	for _, ad := range l2 {
		c.l2 = append(c.l2, c.compileL2(ad))
	}

	bgp := slices.Clone(in.BGP)
	slices.SortFunc(bgp, func(a, b *ipam.BGPAdvertisement) int { return strings.Compare(a.ID, b.ID) })
	c.peerAds = make([]bitset, len(c.peers))
	for i := range c.peerAds {
		c.peerAds[i] = newBitset(len(bgp))
	}
	for i, ad := range bgp {
		b := c.compileBGP(ad)
		for _, p := range b.peers {
			c.peerAds[p].set(i)
		}
		c.bgp = append(c.bgp, b)
	}
	return c
}

func (c *compiled) compileL2(ad *ipam.L2Advertisement) *l2Ad {
	a := &l2Ad{
		ad:     ad,
		sel:    newSelection(ad.Pools, ad.PoolSelectors, ad.OwnerSelectors),
		match:  c.matchNodes(ad.NodeSelectors),
		usable: make([]bool, len(c.nodes)),
		tier:   make([]int, len(c.nodes)),
	}
	if len(ad.Interfaces) > 0 {
		a.ifaces = slices.Clip(slices.Compact(slices.Sorted(slices.Values(ad.Interfaces))))
	}
	for i, n := range c.nodes {
		a.usable[i] = c.active[i] && a.match[i] && hasUpInterface(n, ad.Interfaces)
		a.tier[i] = noTier
		for _, np := range ad.NodePriorities {
			if np.Priority < a.tier[i] && np.Selector.Matches(n.Labels) {
				a.tier[i] = np.Priority
			}
		}
	}
	return a
}

func (c *compiled) compileBGP(ad *ipam.BGPAdvertisement) *bgpAd {
	b := &bgpAd{
		ad:    ad,
		sel:   newSelection(ad.Pools, ad.PoolSelectors, ad.OwnerSelectors),
		match: c.matchNodes(ad.NodeSelectors),
		agg4:  aggLength(ad.AggregationLength, 32),
		agg6:  aggLength(ad.AggregationLengthV6, 128),
	}
	if len(ad.Peers) == 0 {
		for i := range c.peers {
			b.peers = append(b.peers, i)
		}
	} else {
		for _, id := range ad.Peers {
			if i, ok := c.peerIdx[id]; ok {
				b.peers = append(b.peers, i)
			}
		}
		slices.Sort(b.peers)
		b.peers = slices.Compact(b.peers)
	}
	for _, s := range ad.Communities {
		v, _, err := c.community(s)
		switch {
		case err != nil:
		case v.large:
			b.large = append(b.large, v.lg)
		default:
			b.comms = append(b.comms, v.std)
		}
	}
	slices.Sort(b.comms)
	b.comms = slices.Clip(slices.Compact(b.comms))
	slices.SortFunc(b.large, cmpLarge)
	b.large = slices.Clip(slices.Compact(b.large))
	return b
}

// aggLength is the effective aggregation length: the default for 0 and for
// lengths out of range (which Check reports).
func aggLength(n, full int) int {
	if n <= 0 || n > full {
		return full
	}
	return n
}

func cmpLarge(a, b [3]uint32) int {
	for i := range a {
		if c := cmp.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// matchNodes evaluates node selectors (empty: all) on every node.
func (c *compiled) matchNodes(sels []selector.Selector) []bool {
	m := make([]bool, len(c.nodes))
	for i, n := range c.nodes {
		m[i] = selector.AnyMatches(sels, n.Labels)
	}
	return m
}

// hasUpInterface reports whether n has an Up interface among names, or any
// Up interface when names is empty.
func hasUpInterface(n *ipam.Node, names []string) bool {
	for _, ifc := range n.Interfaces {
		if ifc.Up && (len(names) == 0 || slices.Contains(names, ifc.Name)) {
			return true
		}
	}
	return false
}

func newSelection(pools []string, poolSels, ownerSels []selector.Selector) adSelection {
	return adSelection{pools: pools, poolSels: poolSels, ownerSels: ownerSels, byPool: map[string]bool{}}
}

// poolSelected reports whether the advertisement selects the pool with ID
// id: listed in Pools, or matching a pool selector; both empty select every
// pool.
func (s *adSelection) poolSelected(c *compiled, id string) bool {
	if v, ok := s.byPool[id]; ok {
		return v
	}
	v := len(s.pools) == 0 && len(s.poolSels) == 0 || slices.Contains(s.pools, id)
	if !v && len(s.poolSels) > 0 {
		if p := c.in.Pools[id]; p != nil {
			v = selector.AnyMatches(s.poolSels, p.Labels)
		}
	}
	s.byPool[id] = v
	return v
}

// selects reports whether the advertisement selects allocation a.
func (s *adSelection) selects(c *compiled, a *ipam.Allocation) bool {
	return s.poolSelected(c, a.Pool) && selector.AnyMatchesSet(s.ownerSels, a.OwnerLabels)
}

// l2AdsOf returns the L2 advertisements selecting a (none for a global
// group's member).
func (c *compiled) l2AdsOf(a *ipam.Allocation) bitset {
	b := newBitset(len(c.l2))
	if a.GlobalGroup != "" {
		return b // L2 is per segment: a global address is announced over BGP only
	}
	for i, ad := range c.l2 {
		if ad.sel.selects(c, a) {
			b.set(i)
		}
	}
	return b
}

// bgpAdsOf returns the indexes of the BGP advertisements selecting a.
func (c *compiled) bgpAdsOf(a *ipam.Allocation) []int {
	var out []int
	for i, ad := range c.bgp {
		if ad.sel.selects(c, a) {
			out = append(out, i)
		}
	}
	return out
}

// endpoints returns the indexes of a's known endpoint nodes, sorted.
func (c *compiled) endpoints(a *ipam.Allocation) []int {
	out := make([]int, 0, len(a.EndpointNodes))
	for _, name := range a.EndpointNodes {
		if i, ok := c.nodeIdx[name]; ok {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// allocName is how a PlanL2 names an allocation: "tenant/id".
func allocName(a *ipam.Allocation) string { return a.Tenant + "/" + a.ID }

// communityValue is a parsed community.
type communityValue struct {
	large bool
	std   uint32
	lg    [3]uint32
}

// community resolves s, an alias name or a community literal (aliases take
// precedence, as in MetalLB), and parses it. On failure it returns the
// CamelCase reason for Check with the error.
func (c *compiled) community(s string) (communityValue, string, error) {
	v := s
	if alias, ok := c.aliases[s]; ok {
		v = alias
	}
	return parseCommunity(v)
}

// parseCommunity parses a community literal.
func parseCommunity(v string) (communityValue, string, error) {
	if ipam.IsLargeCommunity(v) {
		lg, err := ipam.ParseLargeCommunity(v)
		if err != nil {
			return communityValue{}, ReasonInvalidCommunity, err
		}
		return communityValue{large: true, lg: lg}, "", nil
	}
	if !strings.Contains(v, ":") {
		return communityValue{}, ReasonUnknownCommunityAlias, ErrUnknownCommunityAlias
	}
	std, err := ipam.ParseStandardCommunity(v)
	if err != nil {
		return communityValue{}, ReasonInvalidCommunity, err
	}
	return communityValue{std: std}, "", nil
}
