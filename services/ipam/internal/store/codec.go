package store

import (
	"encoding/json"
	"fmt"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// encode returns the stored form of a value of the given kind.
func encode(k ipam.Kind, v any) ([]byte, error) {
	ok := false
	switch v.(type) {
	case *ipam.Pool:
		ok = k == ipam.KindPool
	case *ipam.Allocation:
		ok = k == ipam.KindAllocation
	case *ipam.Claim:
		ok = k == ipam.KindClaim
	case *ipam.Hold:
		ok = k == ipam.KindHold
	case *ipam.AuditRecord:
		ok = k == ipam.KindAudit
	case *ipam.RequestRecord:
		ok = k == ipam.KindRequest
	case *ipam.L2Advertisement:
		ok = k == ipam.KindL2Advertisement
	case *ipam.BGPAdvertisement:
		ok = k == ipam.KindBGPAdvertisement
	case *ipam.BGPPeer:
		ok = k == ipam.KindBGPPeer
	case *ipam.BFDProfile:
		ok = k == ipam.KindBFDProfile
	case *ipam.Community:
		ok = k == ipam.KindCommunity
	case *ipam.ClusterNode:
		ok = k == ipam.KindClusterNode
	case *ipam.Node:
		ok = k == ipam.KindNode
	case *ipam.L2Owner:
		ok = k == ipam.KindL2Owner
	case *ipam.L2OwnerSet:
		ok = k == ipam.KindL2OwnerSet
	case *ipam.Drain:
		ok = k == ipam.KindDrain
	case *ipam.Tenant:
		ok = k == ipam.KindTenant
	case *ipam.Token:
		ok = k == ipam.KindToken
	case *ipam.TokenHash:
		ok = k == ipam.KindTokenHash
	case *ipam.Share:
		ok = k == ipam.KindShare
	case *ipam.TenantGuard:
		ok = k == ipam.KindTenantGuard
	case *ipam.GlobalGroup:
		ok = k == ipam.KindGlobalGroup
	}
	if !ok {
		return nil, fmt.Errorf("store: value %T does not match kind %d", v, k)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("store: encode %T: %w", v, err)
	}
	return b, nil
}

// decode parses a stored value of the given kind.
func decode(k ipam.Kind, b []byte) (any, error) {
	if k == ipam.KindLeadership {
		return &ipam.Leadership{Holder: string(b)}, nil // etcd's recipe writes it raw
	}
	v := ipam.NewValue(k)
	if v == nil {
		return nil, fmt.Errorf("store: unknown kind %d", k)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("store: decode kind %d: %w", k, err)
	}
	return v, nil
}
