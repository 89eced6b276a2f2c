package planner

// A deliberately naive reference of the rules, written from the
// specification with plain loops and no shared code with the planner's
// optimised paths (no bitsets, classes, caches or rendezvous), for the
// property tests to compare against.

import (
	"math"
	"net/netip"
	"slices"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

func refPoolSelected(in *Input, pools []string, poolSels []selector.Selector, id string) bool {
	if len(pools) == 0 && len(poolSels) == 0 {
		return true
	}
	if slices.Contains(pools, id) {
		return true
	}
	p := in.Pools[id]
	return p != nil && len(poolSels) > 0 && selector.AnyMatches(poolSels, p.Labels)
}

func refL2Selects(in *Input, ad *ipam.L2Advertisement, a *ipam.Allocation) bool {
	return refPoolSelected(in, ad.Pools, ad.PoolSelectors, a.Pool) && selector.AnyMatchesSet(ad.OwnerSelectors, a.OwnerLabels)
}

func refBGPSelects(in *Input, ad *ipam.BGPAdvertisement, a *ipam.Allocation) bool {
	return refPoolSelected(in, ad.Pools, ad.PoolSelectors, a.Pool) && selector.AnyMatchesSet(ad.OwnerSelectors, a.OwnerLabels)
}

// refEligible returns the nodes allowed to own addr (its best tier), or
// nil, and whether any L2 advertisement selects the address at all.
func refEligible(in *Input, addr netip.Addr) (best []string, selected bool) {
	tier := map[string]int{}
	var holders []*ipam.Allocation
	for _, a := range in.Allocations {
		if !slices.Contains(a.Addrs, addr) {
			continue
		}
		sel := false
		for _, ad := range in.L2 {
			if !refL2Selects(in, ad, a) {
				continue
			}
			sel = true
			for _, n := range in.Nodes {
				if !n.Live || n.Draining || !selector.AnyMatches(ad.NodeSelectors, n.Labels) {
					continue
				}
				up := false
				for _, i := range n.Interfaces {
					if i.Up && (len(ad.Interfaces) == 0 || slices.Contains(ad.Interfaces, i.Name)) {
						up = true
					}
				}
				if !up {
					continue
				}
				t := math.MaxInt
				for _, np := range ad.NodePriorities {
					if np.Selector.Matches(n.Labels) && np.Priority < t {
						t = np.Priority
					}
				}
				if old, ok := tier[n.Name]; !ok || t < old {
					tier[n.Name] = t
				}
			}
		}
		if sel {
			holders = append(holders, a)
		}
	}
	if len(holders) == 0 {
		return nil, false
	}
	for _, h := range holders {
		if h.TrafficPolicy != ipam.TrafficLocal {
			continue
		}
		for name := range tier {
			if !slices.Contains(h.EndpointNodes, name) {
				delete(tier, name)
			}
		}
	}
	bt := math.MaxInt
	for _, t := range tier {
		bt = min(bt, t)
	}
	for name, t := range tier {
		if t == bt {
			best = append(best, name)
		}
	}
	slices.Sort(best)
	return best, true
}

// refRoutes returns every active node's routes by the rules.
func refRoutes(in *Input) map[string][]ipam.PlanRoute {
	aliases := map[string]string{}
	comms := slices.Clone(in.Communities)
	slices.SortFunc(comms, func(a, b *ipam.Community) int { return strings.Compare(a.ID, b.ID) })
	for _, c := range comms {
		for _, al := range c.Aliases {
			if _, ok := aliases[al.Name]; !ok {
				aliases[al.Name] = al.Value
			}
		}
	}
	type key struct {
		node   string
		prefix netip.Prefix
		peer   string
	}
	routes := map[key]*ipam.PlanRoute{}
	// Per prefix: whether an active allocation contributes to it, and
	// whether a global group's backup member does.
	active, backup := map[netip.Prefix]bool{}, map[netip.Prefix]bool{}
	known := func(names []string) bool {
		return slices.ContainsFunc(in.Nodes, func(n *ipam.Node) bool { return slices.Contains(names, n.Name) })
	}
	for _, a := range in.Allocations {
		if a.GlobalGroup != "" && len(a.EndpointNodes) == 0 {
			continue // a global member without ready endpoints withdraws
		}
		if a.TrafficPolicy == ipam.TrafficLocal && !known(a.EndpointNodes) {
			continue
		}
		for _, ad := range in.BGP {
			if !refBGPSelects(in, ad, a) {
				continue
			}
			for _, addr := range a.Addrs {
				prefix := refAggregate(in, ad, a.Pool, addr)
				if a.GlobalBackup {
					backup[prefix] = true
				} else {
					active[prefix] = true
				}
			}
		}
	}
	for _, a := range in.Allocations {
		if a.GlobalGroup != "" && len(a.EndpointNodes) == 0 {
			continue
		}
		for _, ad := range in.BGP {
			if !refBGPSelects(in, ad, a) {
				continue
			}
			for _, addr := range a.Addrs {
				prefix := refAggregate(in, ad, a.Pool, addr)
				for _, n := range in.Nodes {
					if !n.Live || n.Draining || !selector.AnyMatches(ad.NodeSelectors, n.Labels) {
						continue
					}
					if a.TrafficPolicy == ipam.TrafficLocal && !slices.Contains(a.EndpointNodes, n.Name) {
						continue
					}
					for _, p := range in.Peers {
						if len(ad.Peers) > 0 && !slices.Contains(ad.Peers, p.ID) || !selector.AnyMatches(p.NodeSelectors, n.Labels) {
							continue
						}
						if prefix.Addr().Is4() != p.PeerAddress.Unmap().Is4() || !p.PeerAddress.IsValid() {
							continue // the session carries the peer address's family only
						}
						k := key{n.Name, prefix, p.ID}
						r := routes[k]
						if r == nil {
							r = &ipam.PlanRoute{Prefix: prefix, Peer: p.ID}
							routes[k] = r
						}
						for _, s := range ad.Communities {
							if v, ok := aliases[s]; ok {
								s = v
							}
							if l, err := ipam.ParseLargeCommunity(s); err == nil {
								r.LargeCommunities = append(r.LargeCommunities, l)
							} else if c, err := ipam.ParseStandardCommunity(s); err == nil {
								r.Communities = append(r.Communities, c)
							}
						}
						if p.MyASN == p.PeerASN && ad.LocalPref != 0 && (r.LocalPref == 0 || ad.LocalPref < r.LocalPref) {
							r.LocalPref = ad.LocalPref
						}
					}
				}
			}
		}
	}
	out := map[string][]ipam.PlanRoute{}
	for k, r := range routes {
		if backup[k.prefix] && !active[k.prefix] {
			r.MED = ipam.BackupMED
			if p := refPeer(in, k.peer); p != nil && p.MyASN != p.PeerASN {
				r.ASPathPrepend = ipam.BackupASPathPrepend
			} else if p != nil {
				lp := r.LocalPref
				if lp == 0 {
					lp = 100
				}
				r.LocalPref = lp / 2
			}
		}
		slices.Sort(r.Communities)
		r.Communities = slices.Compact(r.Communities)
		slices.SortFunc(r.LargeCommunities, cmpLarge)
		r.LargeCommunities = slices.Compact(r.LargeCommunities)
		out[k.node] = append(out[k.node], *r)
	}
	for _, rs := range out {
		slices.SortFunc(rs, cmpRoute)
	}
	return out
}

// refPeer returns the peer with ID id.
func refPeer(in *Input, id string) *ipam.BGPPeer {
	for _, p := range in.Peers {
		if p.ID == id {
			return p
		}
	}
	return nil
}

// refAggregate masks addr to the advertisement's aggregation length, never
// shorter than the pool's CIDR around it.
func refAggregate(in *Input, ad *ipam.BGPAdvertisement, pool string, addr netip.Addr) netip.Prefix {
	bits := ad.AggregationLength
	if addr.Is6() {
		bits = ad.AggregationLengthV6
	}
	if bits <= 0 || bits > addr.BitLen() {
		bits = addr.BitLen()
	}
	floor := addr.BitLen()
	if p := in.Pools[pool]; p != nil {
		for _, r := range p.Ranges {
			for _, cidr := range r.IPRange().Prefixes() {
				if cidr.Contains(addr) {
					floor = cidr.Bits()
				}
			}
		}
	}
	pr, _ := addr.Prefix(max(bits, floor))
	return pr
}
