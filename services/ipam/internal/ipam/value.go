package ipam

// NewValue returns a new, empty value of the type stored under kind k (a
// pointer, such as *Pool for KindPool), or nil for an unknown kind.
func NewValue(k Kind) any {
	switch k {
	case KindPool:
		return new(Pool)
	case KindAllocation:
		return new(Allocation)
	case KindClaim:
		return new(Claim)
	case KindHold:
		return new(Hold)
	case KindAudit:
		return new(AuditRecord)
	case KindRequest:
		return new(RequestRecord)
	case KindL2Advertisement:
		return new(L2Advertisement)
	case KindBGPAdvertisement:
		return new(BGPAdvertisement)
	case KindBGPPeer:
		return new(BGPPeer)
	case KindBFDProfile:
		return new(BFDProfile)
	case KindCommunity:
		return new(Community)
	case KindClusterNode:
		return new(ClusterNode)
	case KindNode:
		return new(Node)
	case KindL2Owner:
		return new(L2Owner)
	case KindL2OwnerSet:
		return new(L2OwnerSet)
	case KindDrain:
		return new(Drain)
	case KindTenant:
		return new(Tenant)
	case KindToken:
		return new(Token)
	case KindTokenHash:
		return new(TokenHash)
	case KindShare:
		return new(Share)
	case KindTenantGuard:
		return new(TenantGuard)
	case KindGlobalGroup:
		return new(GlobalGroup)
	case KindLeadership:
		return new(Leadership)
	}
	return nil
}
