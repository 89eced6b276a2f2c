// Package access owns who may call what on the IPAM: it takes each
// caller's identity from its verified client certificate, or from an
// announcer's token checked by Tokens (never from what the caller says),
// holds the table of every gRPC method against every role, default deny,
// and enforces it with gRPC interceptors that scope each request to what
// the caller is bound to (its tenant, its node).
package access

import (
	"fmt"

	"github.com/beaconlb/beacon/pkg/spiffeid"
)

// Access is what one role may do with one method.
type Access uint8

const (
	// Deny refuses the call with PermissionDenied.
	Deny Access = iota
	// Allow lets the call through.
	Allow
	// Own lets the call through if every resource name in every request
	// message is the caller's tenant's (tenantscope.CheckRequest);
	// responses naming another tenant's resources are withheld.
	Own
	// OwnPools narrows pool reads to the pools the caller's tenant may
	// draw from.
	OwnPools
	// OwnPool lets an adapter create, change and delete only pools that
	// serve its tenant alone (their tenants list is exactly its tenant),
	// before and after the change.
	OwnPool
	// OwnNode lets an announcer subscribe only as its own node of its own
	// tenant.
	OwnNode
)

func (a Access) String() string {
	switch a {
	case Deny:
		return "deny"
	case Allow:
		return "allow"
	case Own:
		return "own"
	case OwnPools:
		return "own-pools"
	case OwnPool:
		return "own-pool"
	case OwnNode:
		return "own-node"
	default:
		return fmt.Sprintf("Access(%d)", uint8(a))
	}
}

// Rule is one row of the table: the access of each role. The gateway and
// admins may call everything: the gateway checks its own callers (see its
// policy table) and is the only caller whose beacon-actor is believed.
type Rule struct {
	Adapter, Announcer Access
}

// For returns the access of role; unknown roles are denied.
func (r Rule) For(role spiffeid.Role) Access {
	switch role {
	case spiffeid.Gateway, spiffeid.Admin:
		return Allow
	case spiffeid.Adapter:
		return r.Adapter
	case spiffeid.Announcer:
		return r.Announcer
	default:
		return Deny
	}
}

// Shorthands.
var (
	adminOnly = Rule{}
	adapter   = Rule{Adapter: Own}
)

// table is the authorization table: full gRPC method name → the access of
// adapters and announcers (gateway and admins: every method). Every method
// of every service in beacon.ipam.v1 has a row (a test checks it against
// the proto descriptors); a method without one is denied to all but the
// gateway and admins.
var table = map[string]Rule{
	// Pools are shared by every tenant: an adapter reads those its tenant
	// may draw from and manages only those that serve its tenant alone
	// (the pools it imports from its cluster's IPAddressPools).
	"/beacon.ipam.v1.PoolService/CreatePool": {Adapter: OwnPool},
	"/beacon.ipam.v1.PoolService/GetPool":    {Adapter: OwnPools},
	"/beacon.ipam.v1.PoolService/ListPools":  {Adapter: OwnPools},
	"/beacon.ipam.v1.PoolService/UpdatePool": {Adapter: OwnPool},
	"/beacon.ipam.v1.PoolService/DeletePool": {Adapter: OwnPool},

	"/beacon.ipam.v1.AllocationService/Allocate":         adapter,
	"/beacon.ipam.v1.AllocationService/Release":          adapter,
	"/beacon.ipam.v1.AllocationService/GetAllocation":    adapter,
	"/beacon.ipam.v1.AllocationService/ListAllocations":  adapter,
	"/beacon.ipam.v1.AllocationService/RenewAllocation":  adapter,
	"/beacon.ipam.v1.AllocationService/UpdateAllocation": adapter,
	"/beacon.ipam.v1.AllocationService/WatchAllocations": adapter,

	"/beacon.ipam.v1.AuditService/ListAuditRecords": adapter,

	"/beacon.ipam.v1.AnnouncementService/CreateL2Advertisement":  adapter,
	"/beacon.ipam.v1.AnnouncementService/GetL2Advertisement":     adapter,
	"/beacon.ipam.v1.AnnouncementService/ListL2Advertisements":   adapter,
	"/beacon.ipam.v1.AnnouncementService/UpdateL2Advertisement":  adapter,
	"/beacon.ipam.v1.AnnouncementService/DeleteL2Advertisement":  adapter,
	"/beacon.ipam.v1.AnnouncementService/CreateBGPAdvertisement": adapter,
	"/beacon.ipam.v1.AnnouncementService/GetBGPAdvertisement":    adapter,
	"/beacon.ipam.v1.AnnouncementService/ListBGPAdvertisements":  adapter,
	"/beacon.ipam.v1.AnnouncementService/UpdateBGPAdvertisement": adapter,
	"/beacon.ipam.v1.AnnouncementService/DeleteBGPAdvertisement": adapter,
	"/beacon.ipam.v1.AnnouncementService/CreateBGPPeer":          adapter,
	"/beacon.ipam.v1.AnnouncementService/GetBGPPeer":             adapter,
	"/beacon.ipam.v1.AnnouncementService/ListBGPPeers":           adapter,
	"/beacon.ipam.v1.AnnouncementService/UpdateBGPPeer":          adapter,
	"/beacon.ipam.v1.AnnouncementService/DeleteBGPPeer":          adapter,
	"/beacon.ipam.v1.AnnouncementService/CreateBFDProfile":       adapter,
	"/beacon.ipam.v1.AnnouncementService/GetBFDProfile":          adapter,
	"/beacon.ipam.v1.AnnouncementService/ListBFDProfiles":        adapter,
	"/beacon.ipam.v1.AnnouncementService/UpdateBFDProfile":       adapter,
	"/beacon.ipam.v1.AnnouncementService/DeleteBFDProfile":       adapter,
	"/beacon.ipam.v1.AnnouncementService/CreateNode":             adapter,
	"/beacon.ipam.v1.AnnouncementService/GetNode":                adapter,
	"/beacon.ipam.v1.AnnouncementService/ListNodes":              adapter,
	"/beacon.ipam.v1.AnnouncementService/UpdateNode":             adapter,
	"/beacon.ipam.v1.AnnouncementService/DeleteNode":             adapter,
	"/beacon.ipam.v1.AnnouncementService/CreateCommunity":        adapter,
	"/beacon.ipam.v1.AnnouncementService/GetCommunity":           adapter,
	"/beacon.ipam.v1.AnnouncementService/ListCommunities":        adapter,
	"/beacon.ipam.v1.AnnouncementService/UpdateCommunity":        adapter,
	"/beacon.ipam.v1.AnnouncementService/DeleteCommunity":        adapter,

	// An announcer opens its own node's session and nothing else: its
	// status and interfaces travel on that stream, its plan comes back on
	// it (with only its own peers' secrets).
	"/beacon.ipam.v1.AnnouncerService/Subscribe":        {Announcer: OwnNode},
	"/beacon.ipam.v1.AnnouncerService/GetAnnouncer":     adapter,
	"/beacon.ipam.v1.AnnouncerService/ListAnnouncers":   adapter,
	"/beacon.ipam.v1.AnnouncerService/DrainAnnouncer":   adapter,
	"/beacon.ipam.v1.AnnouncerService/UndrainAnnouncer": adapter,

	"/beacon.ipam.v1.TenantService/CreateTenant": adminOnly,
	"/beacon.ipam.v1.TenantService/GetTenant":    adapter,
	"/beacon.ipam.v1.TenantService/ListTenants":  adminOnly,
	"/beacon.ipam.v1.TenantService/UpdateTenant": adminOnly,
	"/beacon.ipam.v1.TenantService/DeleteTenant": adminOnly,

	// Global groups are the administrator's: a group lists members of
	// several tenants. An adapter joins one through Allocate (where the
	// group's grant is checked) and sees the shared address in its own
	// allocation.
	"/beacon.ipam.v1.GlobalGroupService/CreateGlobalGroup": adminOnly,
	"/beacon.ipam.v1.GlobalGroupService/GetGlobalGroup":    adminOnly,
	"/beacon.ipam.v1.GlobalGroupService/ListGlobalGroups":  adminOnly,
	"/beacon.ipam.v1.GlobalGroupService/UpdateGlobalGroup": adminOnly,
	"/beacon.ipam.v1.GlobalGroupService/DeleteGlobalGroup": adminOnly,

	"/beacon.ipam.v1.TokenService/CreateToken":           adminOnly,
	"/beacon.ipam.v1.TokenService/GetToken":              adminOnly,
	"/beacon.ipam.v1.TokenService/ListTokens":            adminOnly,
	"/beacon.ipam.v1.TokenService/DeleteToken":           adminOnly,
	"/beacon.ipam.v1.TokenService/VerifyToken":           adminOnly,
	"/beacon.ipam.v1.TokenService/WatchTokenRevocations": adminOnly,

	// Bootstrap tokens are an admin's to make; trading one for a node
	// certificate is open to callers with no credential at all (see
	// anonymous), since the token in the request is the credential.
	"/beacon.ipam.v1.CertificateService/CreateBootstrapToken":  adminOnly,
	"/beacon.ipam.v1.CertificateService/CreateNodeCertificate": adminOnly,
}

// anonymous are the methods a caller that presents no credential (no
// client certificate, no token) may call: their request carries its own
// credential, which the method checks. A caller that does present one is
// held to table as usual.
var anonymous = map[string]bool{
	"/beacon.ipam.v1.CertificateService/CreateNodeCertificate": true,
}
