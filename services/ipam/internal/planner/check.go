package planner

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// ErrUnknownCommunityAlias is the error for a BGP advertisement's community
// that is neither a community literal nor a known alias.
var ErrUnknownCommunityAlias = errors.New("unknown community alias")

// The reasons of Check's warnings.
const (
	// ReasonUnknownPool: an advertisement names a pool that does not exist.
	ReasonUnknownPool = "UnknownPool"
	// ReasonUnknownPeer: a BGP advertisement names a peer that does not
	// exist.
	ReasonUnknownPeer = "UnknownPeer"
	// ReasonUnknownBFDProfile: a peer names a BFD profile that does not
	// exist; it peers without BFD.
	ReasonUnknownBFDProfile = "UnknownBFDProfile"
	// ReasonUnknownCommunityAlias: a community is neither a literal nor an
	// alias; it is left out.
	ReasonUnknownCommunityAlias = "UnknownCommunityAlias"
	// ReasonInvalidCommunity: a community literal or alias value does not
	// parse; it is left out.
	ReasonInvalidCommunity = "InvalidCommunity"
	// ReasonDuplicateCommunityAlias: two Community resources define one
	// alias differently; the one with the lower ID wins.
	ReasonDuplicateCommunityAlias = "DuplicateCommunityAlias"
	// ReasonInvalidAggregationLength: an aggregation length is out of range;
	// the default (host routes) is used.
	ReasonInvalidAggregationLength = "InvalidAggregationLength"
	// ReasonAggregationTooShort: an aggregation length is shorter than a
	// selected pool's prefix, so the aggregate would cover addresses outside
	// the pool; the pool's prefix is announced instead.
	ReasonAggregationTooShort = "AggregationTooShort"
	// ReasonNoCommonNode: no known node is selected both by a BGP
	// advertisement and by one of its peers, so it announces nothing.
	ReasonNoCommonNode = "NoCommonNode"
	// ReasonNoPeerOfFamily: a BGP advertisement selects a pool with
	// addresses of a family (IPv4 or IPv6) that none of its peers' sessions
	// carries, so it announces those addresses nowhere.
	ReasonNoPeerOfFamily = "NoPeerOfFamily"
	// ReasonNoMatchingNode: a node selector selects no known node.
	ReasonNoMatchingNode = "NoMatchingNode"
	// ReasonNoMatchingInterface: no node an L2 advertisement selects has
	// any of its interfaces.
	ReasonNoMatchingInterface = "NoMatchingInterface"
	// ReasonConflictingLocalPref: two BGP advertisements give one prefix to
	// one iBGP peer from one node with different local preferences; the
	// lowest is used.
	ReasonConflictingLocalPref = "ConflictingLocalPref"
)

// Check returns the configuration that can never work as written, sorted by
// resource, reason and message; see the Reason constants. Checks that
// depend on nodes (NoCommonNode, NoMatchingNode, NoMatchingInterface) look at
// every known node, live or not, and are skipped while no node is known;
// ConflictingLocalPref looks at the prefixes the allocations produce. Cost:
// compile, O(A·B) for the prefixes, O(B·Pools·R) for the pools' ranges, and
// O(N·B·P) for the node intersections.
func Check(in *Input) []Warning {
	c := compile(in)
	var ws []Warning
	add := func(resource, reason, format string, args ...any) {
		ws = append(ws, Warning{Resource: resource, Reason: reason, Message: fmt.Sprintf(format, args...)})
	}
	c.checkCommunities(add)
	c.checkPeers(add)
	c.checkL2(add)
	c.checkBGP(add)
	c.checkLocalPref(add)
	slices.SortFunc(ws, func(a, b Warning) int {
		return cmp.Or(strings.Compare(a.Resource, b.Resource), strings.Compare(a.Reason, b.Reason),
			strings.Compare(a.Message, b.Message))
	})
	return slices.Compact(ws)
}

type addFunc func(resource, reason, format string, args ...any)

func (c *compiled) checkCommunities(add addFunc) {
	type def struct{ id, value string }
	seen := map[string]def{}
	comms := slices.Clone(c.in.Communities)
	slices.SortFunc(comms, func(a, b *ipam.Community) int { return strings.Compare(a.ID, b.ID) })
	for _, cm := range comms {
		res := "communities/" + cm.ID
		for _, al := range cm.Aliases {
			if _, _, err := parseCommunity(al.Value); err != nil {
				add(res, ReasonInvalidCommunity, "alias %q: value %q is not A:B or large:A:B:C", al.Name, al.Value)
			}
			if d, ok := seen[al.Name]; ok && d.value != al.Value {
				add(res, ReasonDuplicateCommunityAlias, "alias %q is %q here but %q in communities/%s, which wins",
					al.Name, al.Value, d.value, d.id)
			} else if !ok {
				seen[al.Name] = def{cm.ID, al.Value}
			}
		}
	}
}

func (c *compiled) checkPeers(add addFunc) {
	for _, p := range c.peers {
		res := "bgpPeers/" + p.p.ID
		if p.p.BFDProfile != "" && p.bfd == nil {
			add(res, ReasonUnknownBFDProfile, "BFD profile %q does not exist: the sessions run without BFD", p.p.BFDProfile)
		}
		if len(c.nodes) > 0 && !slices.Contains(p.match, true) {
			add(res, ReasonNoMatchingNode, "the node selectors select no known node: no node peers with %s", p.p.PeerAddress)
		}
	}
}

func (c *compiled) checkL2(add addFunc) {
	for _, a := range c.l2 {
		res := "l2Advertisements/" + a.ad.ID
		c.checkPools(add, res, a.ad.Pools)
		if len(c.nodes) == 0 {
			continue
		}
		if !slices.Contains(a.match, true) {
			add(res, ReasonNoMatchingNode, "the node selectors select no known node: its addresses are answered for by no node")
			continue
		}
		if a.ifaces == nil {
			continue
		}
		found := false
		for n, node := range c.nodes {
			if a.match[n] && slices.ContainsFunc(node.Interfaces, func(i ipam.Interface) bool {
				_, ok := slices.BinarySearch(a.ifaces, i.Name)
				return ok
			}) {
				found = true
				break
			}
		}
		if !found {
			add(res, ReasonNoMatchingInterface, "no selected node has any of the interfaces %s", strings.Join(a.ifaces, ", "))
		}
	}
}

func (c *compiled) checkPools(add addFunc, res string, pools []string) {
	for _, id := range pools {
		if _, ok := c.in.Pools[id]; !ok {
			add(res, ReasonUnknownPool, "pool %q does not exist", id)
		}
	}
}

func (c *compiled) checkBGP(add addFunc) {
	poolIDs := slices.Sorted(maps.Keys(c.in.Pools))
	for _, b := range c.bgp {
		res := "bgpAdvertisements/" + b.ad.ID
		c.checkPools(add, res, b.ad.Pools)
		for _, id := range b.ad.Peers {
			if _, ok := c.peerIdx[id]; !ok {
				add(res, ReasonUnknownPeer, "peer %q does not exist", id)
			}
		}
		for _, s := range b.ad.Communities {
			if _, reason, err := c.community(s); err != nil {
				add(res, reason, "community %q: %v; it is left out", s, err)
			}
		}
		if n := b.ad.AggregationLength; n < 0 || n > 32 {
			add(res, ReasonInvalidAggregationLength, "aggregationLength %d is not from 0 to 32: /32 is used", n)
		}
		if n := b.ad.AggregationLengthV6; n < 0 || n > 128 {
			add(res, ReasonInvalidAggregationLength, "aggregationLengthV6 %d is not from 0 to 128: /128 is used", n)
		}
		var selected []string
		for _, id := range poolIDs {
			if p := c.in.Pools[id]; p.AllowsTenant(b.ad.Tenant) && b.sel.poolSelected(c, id) {
				selected = append(selected, id)
				c.checkAggregation(add, res, b, id)
			}
		}
		if !c.checkCommonNode(add, res, b, selected) {
			c.checkFamilies(add, res, b, selected)
		}
	}
}

// checkFamilies reports, per family, the selected pools with addresses of
// that family when none of the advertisement's peers is of it: a session
// carries its peer address's family only.
func (c *compiled) checkFamilies(add addFunc, res string, b *bgpAd, pools []string) {
	has4, has6 := false, false
	for _, p := range b.peers {
		has4 = has4 || c.peers[p].v4
		has6 = has6 || c.peers[p].v6
	}
	var miss4, miss6 []string
	for _, id := range pools {
		ps := c.prefixesOfPool(id)
		if !has4 && slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Addr().Is4() }) {
			miss4 = append(miss4, id)
		}
		if !has6 && slices.ContainsFunc(ps, func(p netip.Prefix) bool { return p.Addr().Is6() }) {
			miss6 = append(miss6, id)
		}
	}
	for _, m := range []struct {
		family string
		pools  []string
	}{{"IPv4", miss4}, {"IPv6", miss6}} {
		if len(m.pools) > 0 {
			add(res, ReasonNoPeerOfFamily, "none of its peers is at an %s address, and a session carries its peer address's family only: the %s addresses of pools %s are announced nowhere by it",
				m.family, m.family, strings.Join(m.pools, ", "))
		}
	}
}

// checkAggregation reports the first prefix of the pool, per family, that
// the advertisement's aggregation length is shorter than.
func (c *compiled) checkAggregation(add addFunc, res string, b *bgpAd, pool string) {
	done4, done6 := false, false
	for _, p := range c.prefixesOfPool(pool) {
		agg, done, name := b.agg4, &done4, "aggregationLength"
		if p.Addr().Is6() {
			agg, done, name = b.agg6, &done6, "aggregationLengthV6"
		}
		if !*done && agg < p.Bits() {
			*done = true
			add(res, ReasonAggregationTooShort,
				"%s %d is shorter than %s of pool %q and would announce addresses outside the pool: /%d is announced there instead",
				name, agg, p, pool, p.Bits())
		}
	}
}

// checkCommonNode reports an advertisement that no known node announces
// to any of its peers, and whether it did.
func (c *compiled) checkCommonNode(add addFunc, res string, b *bgpAd, pools []string) bool {
	what := "its addresses are announced nowhere by it"
	if len(pools) > 0 {
		what = fmt.Sprintf("pools %s are announced nowhere by it", strings.Join(pools, ", "))
	}
	if len(b.peers) == 0 {
		add(res, ReasonNoCommonNode, "it has no existing peer: %s", what)
		return true
	}
	if len(c.nodes) == 0 {
		return false
	}
	for n := range c.nodes {
		if !b.match[n] {
			continue
		}
		for _, p := range b.peers {
			if c.peers[p].match[n] {
				return false
			}
		}
	}
	var ids []string
	for _, p := range b.peers {
		ids = append(ids, c.peers[p].p.ID)
	}
	add(res, ReasonNoCommonNode, "no known node is selected both by its node selectors and by those of its peers (%s): %s",
		strings.Join(ids, ", "), what)
	return true
}

// checkLocalPref reports pairs of advertisements that give one prefix
// different local preferences on one session: once per pair, on both.
func (c *compiled) checkLocalPref(add addFunc) {
	if len(c.bgp) < 2 || len(c.peers) == 0 {
		return
	}
	acc := map[netip.Prefix]*contrib{}
	for _, a := range c.in.Allocations {
		c.addContribs(acc, a, nil)
	}
	prefixes := slices.SortedFunc(maps.Keys(acc), cmpPrefix)
	type pair struct{ i, j int }
	conflicts := map[pair]bool{}
	type found struct {
		first netip.Prefix
		count int
	}
	var order []pair
	hits := map[pair]*found{}
	for _, p := range prefixes {
		ads := acc[p].cluster.clone()
		for _, l := range acc[p].locals {
			ads.set(l.ad)
		}
		var list []int
		ads.each(func(i int) { list = append(list, i) })
		for x, i := range list {
			for _, j := range list[x+1:] {
				k := pair{i, j}
				v, ok := conflicts[k]
				if !ok {
					v = c.lpConflict(i, j)
					conflicts[k] = v
				}
				if !v {
					continue
				}
				if hits[k] == nil {
					hits[k] = &found{first: p}
					order = append(order, k)
				}
				hits[k].count++
			}
		}
	}
	for _, k := range order {
		a, b := c.bgp[k.i].ad, c.bgp[k.j].ad
		h := hits[k]
		for _, side := range [][2]string{{a.ID, b.ID}, {b.ID, a.ID}} {
			add("bgpAdvertisements/"+side[0], ReasonConflictingLocalPref,
				"bgpAdvertisements/%s and bgpAdvertisements/%s give %d prefixes (first %s) different local preferences (%d, %d): %d is used",
				a.ID, b.ID, h.count, h.first, a.LocalPref, b.LocalPref, min(a.LocalPref, b.LocalPref))
		}
	}
}

// lpConflict reports whether BGP advertisements i and j set different
// non-zero local preferences and share an iBGP peer and a node that both
// they and the peer select (any node while none is known).
func (c *compiled) lpConflict(i, j int) bool {
	a, b := c.bgp[i], c.bgp[j]
	if a.ad.LocalPref == 0 || b.ad.LocalPref == 0 || a.ad.LocalPref == b.ad.LocalPref {
		return false
	}
	for _, p := range a.peers {
		if !c.peers[p].ibgp || !slices.Contains(b.peers, p) {
			continue
		}
		if len(c.nodes) == 0 {
			return true
		}
		for n := range c.nodes {
			if a.match[n] && b.match[n] && c.peers[p].match[n] {
				return true
			}
		}
	}
	return false
}
