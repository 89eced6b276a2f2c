// Package policy is the gateway's authorization: one table saying, for
// every gRPC method of the IPAM's API and every role, whether the call is
// allowed and how it is scoped to the caller's tenant, plus the checks that
// enforce the scoping on decoded requests and responses.
package policy

import (
	"fmt"
	"maps"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// Access is what one role may do with one method.
type Access uint8

const (
	// Deny refuses the call with PermissionDenied.
	Deny Access = iota
	// Allow lets the call through unchanged (admins, viewers).
	Allow
	// Own lets the call through if every resource name in the request
	// (and in every later message of a client stream) belongs to the
	// caller's tenant, and at least one does; responses naming another
	// tenant's resources are refused. See tenantscope.CheckRequest.
	Own
	// OwnPools lets a tenant read the pools it may draw from: the request
	// is narrowed to them (ListPools' filter gets `tenant = "T"`), and
	// responses are filtered (ListPools) or refused (GetPool) if they show
	// a pool whose tenants list is set and lacks the caller's tenant.
	OwnPools
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
	default:
		return fmt.Sprintf("Access(%d)", uint8(a))
	}
}

// Rule is one row of the table: the access of each role.
type Rule struct {
	Admin, Viewer, Tenant, Announcer Access
}

// For returns the access of role; unknown roles are denied.
func (r Rule) For(role ipamv1.Role) Access {
	switch role {
	case ipamv1.Role_ROLE_ADMIN:
		return r.Admin
	case ipamv1.Role_ROLE_VIEWER:
		return r.Viewer
	case ipamv1.Role_ROLE_TENANT:
		return r.Tenant
	case ipamv1.Role_ROLE_ANNOUNCER:
		return r.Announcer
	default:
		return Deny
	}
}

// Shorthands for the table.
var (
	adminOnly = Rule{Admin: Allow}
	read      = Rule{Admin: Allow, Viewer: Allow}              // admin and viewer
	tenantRW  = Rule{Admin: Allow, Tenant: Own}                // a tenant's own writes
	tenantR   = Rule{Admin: Allow, Viewer: Allow, Tenant: Own} // a tenant's own reads
	poolR     = Rule{Admin: Allow, Viewer: Allow, Tenant: OwnPools}
	nobody    = Rule{}
)

// Table returns the authorization table: full gRPC method name → access
// per role. Every method of every service in beacon.ipam.v1 has a row (a
// test checks it against the proto descriptors); a method without one is
// denied to everyone. Each call returns a copy: the caller owns it.
func Table() map[string]Rule { return maps.Clone(table) }

// table is the authorization table, never changed (Table hands out
// copies).
var table = map[string]Rule{
	// Pools: admins manage them; tenants read the ones they may draw from.
	"/beacon.ipam.v1.PoolService/CreatePool": adminOnly,
	"/beacon.ipam.v1.PoolService/GetPool":    poolR,
	"/beacon.ipam.v1.PoolService/ListPools":  poolR,
	"/beacon.ipam.v1.PoolService/UpdatePool": adminOnly,
	"/beacon.ipam.v1.PoolService/DeletePool": adminOnly,

	// Allocations: a tenant manages its own.
	"/beacon.ipam.v1.AllocationService/Allocate":         tenantRW,
	"/beacon.ipam.v1.AllocationService/Release":          tenantRW,
	"/beacon.ipam.v1.AllocationService/GetAllocation":    tenantR,
	"/beacon.ipam.v1.AllocationService/ListAllocations":  tenantR,
	"/beacon.ipam.v1.AllocationService/RenewAllocation":  tenantRW,
	"/beacon.ipam.v1.AllocationService/UpdateAllocation": tenantRW,
	"/beacon.ipam.v1.AllocationService/WatchAllocations": tenantR,

	// Audit: a tenant reads its own records.
	"/beacon.ipam.v1.AuditService/ListAuditRecords": tenantR,

	// Announcement config: a tenant manages its own.
	"/beacon.ipam.v1.AnnouncementService/CreateL2Advertisement":  tenantRW,
	"/beacon.ipam.v1.AnnouncementService/GetL2Advertisement":     tenantR,
	"/beacon.ipam.v1.AnnouncementService/ListL2Advertisements":   tenantR,
	"/beacon.ipam.v1.AnnouncementService/UpdateL2Advertisement":  tenantRW,
	"/beacon.ipam.v1.AnnouncementService/DeleteL2Advertisement":  tenantRW,
	"/beacon.ipam.v1.AnnouncementService/CreateBGPAdvertisement": tenantRW,
	"/beacon.ipam.v1.AnnouncementService/GetBGPAdvertisement":    tenantR,
	"/beacon.ipam.v1.AnnouncementService/ListBGPAdvertisements":  tenantR,
	"/beacon.ipam.v1.AnnouncementService/UpdateBGPAdvertisement": tenantRW,
	"/beacon.ipam.v1.AnnouncementService/DeleteBGPAdvertisement": tenantRW,
	"/beacon.ipam.v1.AnnouncementService/CreateBGPPeer":          tenantRW,
	"/beacon.ipam.v1.AnnouncementService/GetBGPPeer":             tenantR,
	"/beacon.ipam.v1.AnnouncementService/ListBGPPeers":           tenantR,
	"/beacon.ipam.v1.AnnouncementService/UpdateBGPPeer":          tenantRW,
	"/beacon.ipam.v1.AnnouncementService/DeleteBGPPeer":          tenantRW,
	"/beacon.ipam.v1.AnnouncementService/CreateBFDProfile":       tenantRW,
	"/beacon.ipam.v1.AnnouncementService/GetBFDProfile":          tenantR,
	"/beacon.ipam.v1.AnnouncementService/ListBFDProfiles":        tenantR,
	"/beacon.ipam.v1.AnnouncementService/UpdateBFDProfile":       tenantRW,
	"/beacon.ipam.v1.AnnouncementService/DeleteBFDProfile":       tenantRW,
	"/beacon.ipam.v1.AnnouncementService/CreateNode":             tenantRW,
	"/beacon.ipam.v1.AnnouncementService/GetNode":                tenantR,
	"/beacon.ipam.v1.AnnouncementService/ListNodes":              tenantR,
	"/beacon.ipam.v1.AnnouncementService/UpdateNode":             tenantRW,
	"/beacon.ipam.v1.AnnouncementService/DeleteNode":             tenantRW,
	"/beacon.ipam.v1.AnnouncementService/CreateCommunity":        tenantRW,
	"/beacon.ipam.v1.AnnouncementService/GetCommunity":           tenantR,
	"/beacon.ipam.v1.AnnouncementService/ListCommunities":        tenantR,
	"/beacon.ipam.v1.AnnouncementService/UpdateCommunity":        tenantRW,
	"/beacon.ipam.v1.AnnouncementService/DeleteCommunity":        tenantRW,

	// Announcers: an announcer subscribes for its own tenant only (the
	// hello's parent); a tenant lists, reads and drains its own nodes.
	"/beacon.ipam.v1.AnnouncerService/Subscribe":        {Admin: Allow, Announcer: Own},
	"/beacon.ipam.v1.AnnouncerService/GetAnnouncer":     tenantR,
	"/beacon.ipam.v1.AnnouncerService/ListAnnouncers":   tenantR,
	"/beacon.ipam.v1.AnnouncerService/DrainAnnouncer":   tenantRW,
	"/beacon.ipam.v1.AnnouncerService/UndrainAnnouncer": tenantRW,

	// Tenants (quotas): admins manage them; a tenant reads its own.
	"/beacon.ipam.v1.TenantService/CreateTenant": adminOnly,
	"/beacon.ipam.v1.TenantService/GetTenant":    tenantR,
	"/beacon.ipam.v1.TenantService/ListTenants":  read,
	"/beacon.ipam.v1.TenantService/UpdateTenant": adminOnly,
	"/beacon.ipam.v1.TenantService/DeleteTenant": adminOnly,

	// Global groups: admins manage them and viewers read them; a group
	// lists members of several tenants, so tenants see none (a tenant's
	// member shows the shared address in its own allocation).
	"/beacon.ipam.v1.GlobalGroupService/CreateGlobalGroup": adminOnly,
	"/beacon.ipam.v1.GlobalGroupService/GetGlobalGroup":    read,
	"/beacon.ipam.v1.GlobalGroupService/ListGlobalGroups":  read,
	"/beacon.ipam.v1.GlobalGroupService/UpdateGlobalGroup": adminOnly,
	"/beacon.ipam.v1.GlobalGroupService/DeleteGlobalGroup": adminOnly,

	// Tokens: admins manage them; viewers may read them (never secrets).
	"/beacon.ipam.v1.TokenService/CreateToken": adminOnly,
	"/beacon.ipam.v1.TokenService/GetToken":    read,
	"/beacon.ipam.v1.TokenService/ListTokens":  read,
	"/beacon.ipam.v1.TokenService/DeleteToken": adminOnly,
	// The gateway's own call: an oracle for guessing secrets, never
	// reachable through the gateway, not even by admins.
	"/beacon.ipam.v1.TokenService/VerifyToken": nobody,
	// The gateway's own watch, which keeps its token cache honest.
	"/beacon.ipam.v1.TokenService/WatchTokenRevocations": nobody,

	// Bootstrap tokens for bare-metal nodes: admins make them; nodes trade
	// them at the IPAM directly (they hold no gateway credential).
	"/beacon.ipam.v1.CertificateService/CreateBootstrapToken":  adminOnly,
	"/beacon.ipam.v1.CertificateService/CreateNodeCertificate": nobody,
}
