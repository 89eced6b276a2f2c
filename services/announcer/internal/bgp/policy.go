package bgp

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	api "github.com/osrg/gobgp/v4/api"
)

// Policy names. They never change, so replacing the policies' contents
// (SetPolicies) keeps the global assignments pointing at them.
const (
	importPolicy = "beacon-import"
	exportPolicy = "beacon-export"
)

// exportGroup is one statement of the export policy: these prefixes go to
// this peer with these attributes.
type exportGroup struct {
	peer     netip.Addr
	myASN    uint32 // the AS the session speaks, prepended for attrs.prepend
	ibgp     bool   // never prepended: the peer would see its own AS and drop the route
	attrs    attrs
	prefixes []netip.Prefix
}

// exportGroups lists p's advertisements as statements, in a deterministic
// order: by peer address, then by attribute key.
func exportGroups(p plan) []exportGroup {
	type gk struct {
		peer netip.Addr
		key  string
	}
	groups := map[gk]*exportGroup{}
	for prefix, byPeer := range p.adverts {
		for name, a := range byPeer {
			pc, ok := p.peers[name]
			if !ok {
				continue
			}
			k := gk{pc.Address, a.key()}
			g := groups[k]
			if g == nil {
				g = &exportGroup{peer: pc.Address, myASN: pc.MyASN, ibgp: pc.MyASN == pc.PeerASN, attrs: a}
				groups[k] = g
			}
			g.prefixes = append(g.prefixes, prefix)
		}
	}
	out := make([]exportGroup, 0, len(groups))
	for _, g := range groups {
		slices.SortFunc(g.prefixes, comparePrefix)
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b exportGroup) int {
		if c := a.peer.Compare(b.peer); c != 0 {
			return c
		}
		return strings.Compare(a.attrs.key(), b.attrs.key())
	})
	return out
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// policies builds the complete policy configuration for p: the import policy
// that keeps only local routes and the export policy that gives each peer
// its routes with its attributes.
func policies(p plan) *api.SetPoliciesRequest {
	req := &api.SetPoliciesRequest{
		Policies: []*api.Policy{
			{
				Name: importPolicy,
				Statements: []*api.Statement{{
					Name:       importPolicy + "-local",
					Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
					Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
				}},
			},
			{Name: exportPolicy},
		},
	}
	export := req.Policies[1]
	peerIndex := map[netip.Addr]int{}
	for i, g := range exportGroups(p) {
		pi, ok := peerIndex[g.peer]
		if !ok {
			pi = len(peerIndex)
			peerIndex[g.peer] = pi
			req.DefinedSets = append(req.DefinedSets, &api.DefinedSet{
				DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR,
				Name:        fmt.Sprintf("beacon-peer%d", pi),
				List:        []string{netip.PrefixFrom(g.peer, g.peer.BitLen()).String()},
			})
		}
		set := &api.DefinedSet{
			DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX,
			Name:        fmt.Sprintf("beacon-peer%d-set%d", pi, i),
		}
		for _, pfx := range g.prefixes {
			set.Prefixes = append(set.Prefixes, &api.Prefix{
				IpPrefix:      pfx.String(),
				MaskLengthMin: uint32(pfx.Bits()),
				MaskLengthMax: uint32(pfx.Bits()),
			})
		}
		req.DefinedSets = append(req.DefinedSets, set)
		actions := &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT}
		if len(g.attrs.communities) > 0 {
			cs := make([]string, 0, len(g.attrs.communities))
			for _, c := range g.attrs.communities {
				cs = append(cs, communityString(c))
			}
			actions.Community = &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: cs}
		}
		if len(g.attrs.large) > 0 {
			ls := make([]string, 0, len(g.attrs.large))
			for _, l := range g.attrs.large {
				ls = append(ls, fmt.Sprintf("%d:%d:%d", l[0], l[1], l[2]))
			}
			actions.LargeCommunity = &api.CommunityAction{Type: api.CommunityAction_TYPE_ADD, Communities: ls}
		}
		if g.attrs.localPref != 0 {
			actions.LocalPref = &api.LocalPrefAction{Value: g.attrs.localPref}
		}
		if g.attrs.med != 0 {
			actions.Med = &api.MedAction{Type: api.MedAction_TYPE_REPLACE, Value: int64(g.attrs.med)}
		}
		if g.attrs.prepend != 0 && !g.ibgp {
			actions.AsPrepend = &api.AsPrependAction{Asn: g.myASN, Repeat: g.attrs.prepend}
		}
		export.Statements = append(export.Statements, &api.Statement{
			Name: set.Name,
			Conditions: &api.Conditions{
				NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: fmt.Sprintf("beacon-peer%d", pi)},
				PrefixSet:   &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: set.Name},
			},
			Actions: actions,
		})
	}
	return req
}

// exportOf maps each prefix a peer receives to its attribute key.
func exportOf(p plan, name string) map[netip.Prefix]string {
	out := map[netip.Prefix]string{}
	for prefix, byPeer := range p.adverts {
		if a, ok := byPeer[name]; ok {
			out[prefix] = a.key()
		}
	}
	return out
}

// needsSoftReset lists the peers, kept from old to next unchanged, for which
// a prefix that is in the table both before and after changed: other
// attributes, or given or taken away. Only a soft reset re-evaluates those
// under the new export policy; prefixes entering or leaving the table
// propagate on their own.
func needsSoftReset(old, next plan) []string {
	var out []string
	for name, pc := range next.peers {
		oc, ok := old.peers[name]
		if !ok || !samePeer(oc, pc) {
			continue // new or re-created: it gets the full table anyway
		}
		before, after := exportOf(old, name), exportOf(next, name)
		changed := false
		for prefix, k := range before {
			if _, stays := next.adverts[prefix]; !stays {
				continue
			}
			if after[prefix] != k {
				changed = true
				break
			}
		}
		if !changed {
			for prefix := range after {
				if _, was := old.adverts[prefix]; was {
					if _, had := before[prefix]; !had {
						changed = true
						break
					}
				}
			}
		}
		if changed {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
