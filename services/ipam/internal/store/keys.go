package store

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

const (
	root            = "/beacon/v1/"
	statePrefix     = root + "state/"
	poolsPrefix     = statePrefix + "pools/"
	allocsPrefix    = statePrefix + "allocs/"
	claimsPrefix    = statePrefix + "claims/"
	holdsPrefix     = statePrefix + "holds/"
	auditPrefix     = root + "log/audit/"
	reqPrefix       = root + "log/requests/"
	configPrefix    = statePrefix + "config/"
	l2AdvPrefix     = configPrefix + "l2adv/"
	bgpAdvPrefix    = configPrefix + "bgpadv/"
	peersPrefix     = configPrefix + "peers/"
	bfdPrefix       = configPrefix + "bfd/"
	commPrefix      = configPrefix + "communities/"
	cnodesPrefix    = configPrefix + "nodes/"
	nodesPrefix     = statePrefix + "nodes/"
	ownersPrefix    = statePrefix + "l2owners/"
	ownerSetsPrefix = statePrefix + "l2ownersets/"
	drainsPrefix    = statePrefix + "drains/"
	tenantPrefix    = statePrefix + "tenants/"
	tokenPrefix     = statePrefix + "tokens/"
	hashPrefix      = statePrefix + "tokenhashes/"
	sharesPrefix    = statePrefix + "shares/"
	guardsPrefix    = statePrefix + "tenantguards/"
	groupsPrefix    = statePrefix + "globalgroups/"
	secretPrefix    = root + "secrets/"
	electionsPrefix = root + "elections/"
)

// kindPrefix returns the key prefix of a kind.
func kindPrefix(k ipam.Kind) string {
	switch k {
	case ipam.KindPool:
		return poolsPrefix
	case ipam.KindAllocation:
		return allocsPrefix
	case ipam.KindClaim:
		return claimsPrefix
	case ipam.KindHold:
		return holdsPrefix
	case ipam.KindAudit:
		return auditPrefix
	case ipam.KindRequest:
		return reqPrefix
	case ipam.KindL2Advertisement:
		return l2AdvPrefix
	case ipam.KindBGPAdvertisement:
		return bgpAdvPrefix
	case ipam.KindBGPPeer:
		return peersPrefix
	case ipam.KindBFDProfile:
		return bfdPrefix
	case ipam.KindCommunity:
		return commPrefix
	case ipam.KindNode:
		return nodesPrefix
	case ipam.KindL2Owner:
		return ownersPrefix
	case ipam.KindL2OwnerSet:
		return ownerSetsPrefix
	case ipam.KindDrain:
		return drainsPrefix
	case ipam.KindTenant:
		return tenantPrefix
	case ipam.KindToken:
		return tokenPrefix
	case ipam.KindTokenHash:
		return hashPrefix
	case ipam.KindShare:
		return sharesPrefix
	case ipam.KindTenantGuard:
		return guardsPrefix
	case ipam.KindClusterNode:
		return cnodesPrefix
	case ipam.KindGlobalGroup:
		return groupsPrefix
	case ipam.KindLeadership:
		return electionsPrefix
	}
	panic(fmt.Sprintf("store: unknown kind %d", k)) // a programming error, never input
}

// key returns the etcd key of a ref.
func key(r ipam.Ref) string {
	if r.Kind == ipam.KindClaim {
		a, err := netip.ParseAddr(r.ID)
		if err != nil {
			panic(fmt.Sprintf("store: claim ref %q is not an address", r.ID)) // refs are built from netip.Addr
		}
		return claimKey(a)
	}
	return kindPrefix(r.Kind) + r.ID
}

// claimKey encodes an address so that key order is address order, which lets
// a range of addresses be read or compared as one key range.
//
// An IPv4-mapped IPv6 address is keyed as its IPv4 form: the same address.
func claimKey(a netip.Addr) string {
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		return claimsPrefix + "4/" + hex.EncodeToString(b[:])
	}
	b := a.As16()
	return claimsPrefix + "6/" + hex.EncodeToString(b[:])
}

// parseKey returns the ref of an etcd key under statePrefix or the log.
func parseKey(k string) (ipam.Ref, bool) {
	for _, kp := range []struct {
		kind   ipam.Kind
		prefix string
	}{
		{ipam.KindPool, poolsPrefix},
		{ipam.KindAllocation, allocsPrefix},
		{ipam.KindHold, holdsPrefix},
		{ipam.KindAudit, auditPrefix},
		{ipam.KindRequest, reqPrefix},
		{ipam.KindL2Advertisement, l2AdvPrefix},
		{ipam.KindBGPAdvertisement, bgpAdvPrefix},
		{ipam.KindBGPPeer, peersPrefix},
		{ipam.KindBFDProfile, bfdPrefix},
		{ipam.KindCommunity, commPrefix},
		{ipam.KindNode, nodesPrefix},
		{ipam.KindL2Owner, ownersPrefix},
		{ipam.KindL2OwnerSet, ownerSetsPrefix},
		{ipam.KindDrain, drainsPrefix},
		{ipam.KindTenant, tenantPrefix},
		{ipam.KindToken, tokenPrefix},
		{ipam.KindTokenHash, hashPrefix},
		{ipam.KindShare, sharesPrefix},
		{ipam.KindTenantGuard, guardsPrefix},
		{ipam.KindClusterNode, cnodesPrefix},
		{ipam.KindGlobalGroup, groupsPrefix},
	} {
		if id, ok := strings.CutPrefix(k, kp.prefix); ok {
			return ipam.Ref{Kind: kp.kind, ID: id}, true
		}
	}
	if rest, ok := strings.CutPrefix(k, claimsPrefix); ok {
		if len(rest) < 3 {
			return ipam.Ref{}, false
		}
		b, err := hex.DecodeString(rest[2:])
		if err != nil {
			return ipam.Ref{}, false
		}
		a, ok := netip.AddrFromSlice(b)
		if !ok {
			return ipam.Ref{}, false
		}
		return ipam.Ref{Kind: ipam.KindClaim, ID: a.String()}, true
	}
	return ipam.Ref{}, false
}
