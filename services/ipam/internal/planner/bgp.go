package planner

import (
	"net/netip"
	"slices"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// contrib is what the allocations aggregated into one prefix contribute to
// it.
type contrib struct {
	// cluster are the BGP advertisements through which holders with the
	// CLUSTER traffic policy contribute: every node they select announces.
	cluster bitset
	// locals are the contributions of holders with the LOCAL policy: only
	// their endpoint nodes announce.
	locals []localContrib
	// active and backup count the contributing allocations that are a
	// global group's backup member, and the others: a prefix only backup
	// members contribute to is announced less preferred (see
	// ipam.BackupMED).
	active, backup int
}

// isBackup reports whether only backup members contribute to the prefix.
func (x *contrib) isBackup() bool { return x.backup > 0 && x.active == 0 }

// localContrib is one LOCAL allocation contributing through one
// advertisement.
type localContrib struct {
	ad        int
	endpoints []int // sorted node indexes
}

func (c *compiled) newContrib() *contrib { return &contrib{cluster: newBitset(len(c.bgp))} }

// merge adds o's contributions to x.
func (x *contrib) merge(o *contrib) {
	if o == nil {
		return
	}
	x.cluster.or(o.cluster)
	x.locals = append(x.locals, o.locals...)
	x.active += o.active
	x.backup += o.backup
}

// addContribs adds what a contributes to acc, keyed by aggregated prefix.
// keep, when not nil, filters the prefixes. Cost: O(B) selector evaluations
// plus O(|a.Addrs|·B) prefix computations.
func (c *compiled) addContribs(acc map[netip.Prefix]*contrib, a *ipam.Allocation, keep func(netip.Prefix) bool) {
	if len(a.Addrs) == 0 {
		return
	}
	ads := c.bgpAdsOf(a)
	if len(ads) == 0 {
		return
	}
	if a.GlobalGroup != "" && len(a.EndpointNodes) == 0 {
		// A global group's member whose cluster has no ready endpoint
		// withdraws whatever its traffic policy: the other clusters'
		// members take its traffic (MetalLB #148).
		return
	}
	local := a.TrafficPolicy == ipam.TrafficLocal
	var eps []int
	if local {
		if eps = c.endpoints(a); len(eps) == 0 {
			return // no endpoint: announced by no node
		}
	}
	for _, addr := range a.Addrs {
		for _, ad := range ads {
			p := c.prefixOf(addr, c.bgp[ad], a.Pool)
			if keep != nil && !keep(p) {
				continue
			}
			x := acc[p]
			if x == nil {
				x = c.newContrib()
				acc[p] = x
			}
			if local {
				x.locals = append(x.locals, localContrib{ad: ad, endpoints: eps})
			} else {
				x.cluster.set(ad)
			}
			if a.GlobalBackup {
				x.backup++
			} else {
				x.active++
			}
		}
	}
}

// prefixOf returns the prefix an advertisement announces addr of pool
// under: addr masked to the aggregation length, but never shorter than the
// pool's own prefix around addr, so that no address outside the pool is
// announced (MetalLB refuses such configuration; Check reports it). An
// unknown pool allows no aggregation.
func (c *compiled) prefixOf(addr netip.Addr, ad *bgpAd, pool string) netip.Prefix {
	bits := ad.agg4
	if addr.Is6() {
		bits = ad.agg6
	}
	if full := addr.BitLen(); bits < full {
		bits = max(bits, c.poolFloor(pool, addr))
	}
	p, _ := addr.Prefix(bits)
	return p
}

// poolFloor returns the length of the prefix around addr in the pool's
// ranges, each range split into the fewest CIDR prefixes; addr's full
// length when the pool is unknown or does not contain addr. Cost: O(log R)
// after the pool's first use.
func (c *compiled) poolFloor(pool string, addr netip.Addr) int {
	ps := c.prefixesOfPool(pool)
	i, found := slices.BinarySearchFunc(ps, addr, func(p netip.Prefix, a netip.Addr) int { return p.Addr().Compare(a) })
	if !found {
		i--
	}
	if i >= 0 && ps[i].Contains(addr) {
		return ps[i].Bits()
	}
	return addr.BitLen()
}

// prefixesOfPool returns the pool's ranges as CIDR prefixes sorted by
// address, cached.
func (c *compiled) prefixesOfPool(id string) []netip.Prefix {
	if ps, ok := c.poolPrefixes[id]; ok {
		return ps
	}
	var ps []netip.Prefix
	if p := c.in.Pools[id]; p != nil {
		for _, r := range p.Ranges {
			if r.IsValid() {
				ps = append(ps, r.IPRange().Prefixes()...)
			}
		}
	}
	slices.SortFunc(ps, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	c.poolPrefixes[id] = ps
	return ps
}

// routesFor returns node n's routes for prefix p: to each peer that
// selects n, through every advertisement among acc's that selects n (LOCAL
// contributions only on their endpoint nodes) and announces to that peer.
// Sorted by peer ID. Cost: O(|acc|·E + P·B/64) with E endpoints per LOCAL
// contribution.
func (c *compiled) routesFor(n int, p netip.Prefix, acc *contrib) []ipam.PlanRoute {
	if !c.active[n] || acc == nil {
		return nil
	}
	ads := newBitset(len(c.bgp))
	acc.cluster.each(func(a int) {
		if c.bgp[a].match[n] {
			ads.set(a)
		}
	})
	for _, l := range acc.locals {
		if c.bgp[l.ad].match[n] {
			if _, ok := slices.BinarySearch(l.endpoints, n); ok {
				ads.set(l.ad)
			}
		}
	}
	return c.routesVia(n, p, ads, acc.isBackup(), nil)
}

// routesVia appends to dst node n's routes for p through the advertisements
// in ads (which already select n), to the peers that select n and whose
// sessions carry p's family: an IPv4 prefix goes to IPv4 peers only, an IPv6
// prefix to IPv6 peers only.
func (c *compiled) routesVia(n int, p netip.Prefix, ads bitset, backup bool, dst []ipam.PlanRoute) []ipam.PlanRoute {
	if ads.empty() {
		return dst
	}
	for pi, peer := range c.peers {
		if !peer.match[n] || !peer.carries(p) {
			continue
		}
		via := ads.and(c.peerAds[pi])
		if via.empty() {
			continue
		}
		r := c.attrs(pi, via)
		r.Prefix = p
		if backup {
			r.MED = ipam.BackupMED
			if !c.peers[pi].ibgp {
				r.ASPathPrepend = ipam.BackupASPathPrepend // an iBGP peer would drop a path with its own AS
			} else {
				lp := r.LocalPref
				if lp == 0 {
					lp = 100
				}
				r.LocalPref = lp / 2
			}
		}
		dst = append(dst, r)
	}
	return dst
}

// attrKey names a route's attributes: a peer and the advertisements
// announcing to it.
type attrKey struct {
	peer int
	ads  string
}

// attrs returns a route to peer pi through the advertisements via, without
// its prefix: the union of their communities, and the lowest of their
// non-zero local preferences when the session is iBGP. Cached; the returned
// slices are shared.
func (c *compiled) attrs(pi int, via bitset) ipam.PlanRoute {
	k := attrKey{pi, via.key()}
	if r, ok := c.attrCache[k]; ok {
		return r
	}
	r := ipam.PlanRoute{Peer: c.peers[pi].p.ID}
	n := 0
	via.each(func(i int) {
		ad := c.bgp[i]
		n++
		r.Communities = append(r.Communities, ad.comms...)
		r.LargeCommunities = append(r.LargeCommunities, ad.large...)
		if lp := ad.ad.LocalPref; c.peers[pi].ibgp && lp != 0 && (r.LocalPref == 0 || lp < r.LocalPref) {
			r.LocalPref = lp
		}
	})
	if n > 1 {
		slices.Sort(r.Communities)
		r.Communities = slices.Compact(r.Communities)
		slices.SortFunc(r.LargeCommunities, cmpLarge)
		r.LargeCommunities = slices.Compact(r.LargeCommunities)
	}
	r.Communities = slices.Clip(r.Communities)
	r.LargeCommunities = slices.Clip(r.LargeCommunities)
	c.attrCache[k] = r
	return r
}

// cmpRoute orders routes by prefix, then peer ID.
func cmpRoute(a, b ipam.PlanRoute) int {
	return cmpRouteKey(a.Key(), b.Key())
}

// cmpRouteKey orders route keys by prefix (address, then length), then
// peer ID.
func cmpRouteKey(a, b RouteKey) int { return ipam.CompareRouteKeys(a, b) }

func cmpPrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
