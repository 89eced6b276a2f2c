package ipam

import (
	"net/netip"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/addrspace"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// Family is an address family.
type Family uint8

// The address families.
const (
	FamilyUnspecified Family = iota
	IPv4
	IPv6
)

// FamilyOf returns the family of a.
func FamilyOf(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

// String returns "IPv4" or "IPv6".
func (f Family) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	default:
		return "unspecified"
	}
}

// FamilyPolicy says how strictly an allocation's families are meant.
type FamilyPolicy uint8

// The family policies, as Kubernetes' ipFamilyPolicy.
const (
	SingleStack FamilyPolicy = iota
	PreferDualStack
	RequireDualStack
)

// TrafficPolicy says which nodes may receive an allocation's traffic.
type TrafficPolicy uint8

// The traffic policies.
const (
	TrafficCluster TrafficPolicy = iota
	TrafficLocal
)

// Protocol is a transport protocol.
type Protocol uint8

// The protocols.
const (
	TCP Protocol = iota
	UDP
	SCTP
)

// Port is a port an owner serves.
type Port struct {
	Number   uint16   `json:"n"`
	Protocol Protocol `json:"p,omitempty"`
}

// Policy restricts a pool to matching owners and orders pools (MetalLB's
// serviceAllocation).
type Policy struct {
	// Priority 1 is the highest; 0 is unset, after every set priority.
	Priority           int                 `json:"priority,omitempty"`
	Namespaces         []string            `json:"namespaces,omitempty"`
	NamespaceSelectors []selector.Selector `json:"namespaceSelectors,omitempty"`
	OwnerSelectors     []selector.Selector `json:"ownerSelectors,omitempty"`
}

// Pool is a set of addresses to hand out.
type Pool struct {
	Name          string            `json:"name"`
	UID           string            `json:"uid"`
	Description   string            `json:"description,omitempty"`
	Ranges        []addrspace.Range `json:"ranges"`
	Exclusions    []addrspace.Range `json:"exclusions,omitempty"`
	AutoAssign    bool              `json:"autoAssign"`
	AvoidBuggyIPs bool              `json:"avoidBuggyIPs,omitempty"`
	Tenants       []string          `json:"tenants,omitempty"`
	Policy        *Policy           `json:"policy,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	CreateTime    time.Time         `json:"createTime"`
	UpdateTime    time.Time         `json:"updateTime"`
	// Deleting is set by a forced delete: the pool hands out nothing more
	// while its allocations are released.
	Deleting bool `json:"deleting,omitempty"`
}

// AllowsTenant reports whether tenant may draw from the pool.
func (p *Pool) AllowsTenant(tenant string) bool {
	if len(p.Tenants) == 0 {
		return true
	}
	for _, t := range p.Tenants {
		if t == tenant {
			return true
		}
	}
	return false
}

// Allocation is the set of addresses held by one owner, one per family.
type Allocation struct {
	Tenant          string        `json:"tenant"`
	ID              string        `json:"id"`
	UID             string        `json:"uid"`
	Owner           string        `json:"owner"`
	OwnerUID        string        `json:"ownerUID,omitempty"`
	Namespace       string        `json:"namespace,omitempty"`
	OwnerLabels     selector.Set  `json:"ownerLabels,omitzero"`
	NamespaceLabels selector.Set  `json:"namespaceLabels,omitzero"`
	Families        []Family      `json:"families,omitempty"`
	FamilyPolicy    FamilyPolicy  `json:"familyPolicy,omitempty"`
	RequestedAddrs  []netip.Addr  `json:"requestedAddrs,omitempty"`
	RequestedPool   string        `json:"requestedPool,omitempty"`
	SharingKey      string        `json:"sharingKey,omitempty"`
	Ports           []Port        `json:"ports,omitempty"`
	TrafficPolicy   TrafficPolicy `json:"trafficPolicy,omitempty"`
	EndpointNodes   []string      `json:"endpointNodes,omitempty"`
	TTL             time.Duration `json:"ttl,omitempty"`
	// AddressCount is how many addresses per family (0 and 1: one). An
	// allocation with several holds them alone: no sharing key, global
	// group or requested addresses.
	AddressCount int `json:"addressCount,omitempty"`
	// GlobalGroup, "pool/group", makes the allocation a member of a global
	// group: it gets the group's addresses, shared with the members of the
	// other tenants granted to join (see GlobalGroup).
	GlobalGroup string `json:"globalGroup,omitempty"`
	// GlobalBackup makes the member a standby: its nodes announce the
	// addresses less preferred (see Preference), so routers send it traffic
	// only when no active member announces them.
	GlobalBackup bool `json:"globalBackup,omitempty"`

	Addrs      []netip.Addr `json:"addrs"`
	Pool       string       `json:"pool"`
	ExpireTime time.Time    `json:"expireTime,omitzero"`
	CreateTime time.Time    `json:"createTime"`
	UpdateTime time.Time    `json:"updateTime"`

	// Created says who created the allocation. It is the audit record of
	// the allocation's creation, kept in the allocation while it lives
	// (see CreationRecord): the transaction that ends the allocation writes
	// it to the audit log. Nil in allocations whose creation the log
	// already holds.
	Created *Creation `json:"created,omitempty"`
}

// Creation is who created an allocation, under which audit record ID.
type Creation struct {
	AuditID   string `json:"auditID"`
	Actor     string `json:"actor"`
	RequestID string `json:"requestID,omitempty"`
}

// CreationRecord returns the audit record of a's creation, or nil if a
// does not carry it.
func (a *Allocation) CreationRecord() *AuditRecord {
	if a.Created == nil {
		return nil
	}
	return &AuditRecord{
		Tenant: a.Tenant, ID: a.Created.AuditID, Time: a.CreateTime, Action: ActionAllocate,
		Actor: a.Created.Actor, Allocation: a.ID, Owner: a.Owner, Addrs: a.Addrs, Pool: a.Pool,
		RequestID: a.Created.RequestID,
	}
}

// Holder is one allocation holding a claimed address.
type Holder struct {
	Allocation string `json:"a"` // the allocation's ID
	// Tenant is the allocation's tenant in a global group's claim (whose
	// holders are of several tenants); empty: the claim's.
	Tenant string `json:"t,omitempty"`
	Ports  []Port `json:"p,omitempty"`
}

// TenantIn returns the tenant of holder h of claim c.
func (h Holder) TenantIn(c *Claim) string {
	if h.Tenant != "" {
		return h.Tenant
	}
	return c.Tenant
}

// Is reports whether h, a holder of c, is the allocation tenant/id.
func (h Holder) Is(c *Claim, tenant, id string) bool {
	return h.Allocation == id && h.TenantIn(c) == tenant
}

// Claim records who holds one address. Every address handed out has exactly
// one claim: the etcd key of the claim is what makes "one owner per address"
// hold across replicas.
type Claim struct {
	Addr       netip.Addr `json:"addr"`
	Pool       string     `json:"pool"`
	Tenant     string     `json:"tenant"`
	SharingKey string     `json:"sharingKey,omitempty"`
	// Group, "pool/group", marks the address of a global group: Tenant is
	// then empty and each holder names its tenant. Such an address is never
	// kept in a hold: it is freed when its last holder leaves.
	Group string `json:"group,omitempty"`
	// Holders are the allocations using the address: one, or several sharing
	// it under SharingKey.
	Holders []Holder `json:"holders,omitempty"`
	// HeldFor, when Holders is empty, is the ID of the released allocation the
	// address is kept for (see Hold).
	HeldFor string `json:"heldFor,omitempty"`
}

// Hold keeps a released allocation's addresses for its owner until
// ExpireTime, so that the owner gets them back if it returns.
type Hold struct {
	Allocation Allocation `json:"allocation"`
	ExpireTime time.Time  `json:"expireTime"`
}

// Action is what an audit record says happened.
type Action uint8

// The audited actions.
const (
	ActionUnspecified Action = iota
	ActionAllocate
	ActionRelease
	ActionRenew
	ActionExpire
	ActionHoldEnd
)

// AuditRecord says who did what to which allocation, when.
type AuditRecord struct {
	Tenant     string       `json:"tenant"`
	ID         string       `json:"id"`
	Time       time.Time    `json:"time"`
	Action     Action       `json:"action"`
	Actor      string       `json:"actor"`
	Allocation string       `json:"allocation"`
	Owner      string       `json:"owner"`
	Addrs      []netip.Addr `json:"addrs"`
	Pool       string       `json:"pool"`
	RequestID  string       `json:"requestID,omitempty"`
}

// Key returns the record's ID in the log, "tenant/id": the order of the
// log, and the ID of its ref.
func (r *AuditRecord) Key() string { return r.Tenant + "/" + r.ID }

// RequestRecord remembers the outcome of a request that carried a
// request_id, so that a retry gets the same answer.
type RequestRecord struct {
	Tenant string `json:"tenant"`
	ID     string `json:"id"`
	// Method and Fingerprint tell a retry from a different request that
	// reuses the ID.
	Method      string `json:"method"`
	Fingerprint string `json:"fingerprint"`
	// Result is the encoded response, opaque to this package.
	Result []byte `json:"result"`
}

// Tenant is the resource of a tenant: its quota.
type Tenant struct {
	ID           string    `json:"id"`
	UID          string    `json:"uid"`
	DisplayName  string    `json:"displayName,omitempty"`
	MaxAddresses uint64    `json:"maxAddresses,omitempty"`
	CreateTime   time.Time `json:"createTime"`
	UpdateTime   time.Time `json:"updateTime"`
}

// Role is what a token's holder may do.
type Role uint8

// The roles, numbered as in the API.
const (
	RoleUnspecified Role = iota
	RoleAdmin
	RoleTenant
	RoleAnnouncer
	RoleViewer
)

// Token is a bearer credential; only the SHA-256 of its secret is kept.
type Token struct {
	ID          string    `json:"id"`
	UID         string    `json:"uid"`
	Description string    `json:"description,omitempty"`
	Role        Role      `json:"role"`
	Tenant      string    `json:"tenant,omitempty"`
	ExpireTime  time.Time `json:"expireTime,omitzero"`
	CreateTime  time.Time `json:"createTime"`
	Hash        string    `json:"hash"`
}

// Share guards one sharing key of a tenant. Every change that takes an
// address for the key that it did not hold before (a first sharer, or a
// sharer whose ports clash with the key's other addresses) writes it,
// conditioned on the revision its replica saw. Two replicas planning a new
// address for the key at the same instant therefore cannot both commit: the
// loser waits until its index has seen the winner's commit and plans again,
// sharing the winner's address. The record only needs to outlive the time a
// replica's watch takes to deliver a commit, so it is tied to a lease and
// disappears by itself.
type Share struct {
	Tenant string `json:"tenant"`
	Key    string `json:"key"`
}

// TenantGuard guards the quota of one tenant. Every allocation of a tenant
// that has a quota writes it, conditioned on the revision its replica saw,
// so that allocations through two replicas cannot both pass the quota check
// against the same count: the loser waits until its index has seen the
// winner's commit and checks again. Allocations of one replica committed in
// one transaction write it once (the replica counted them together). Like
// Share, it only needs to outlive a watch's delay and lives on a lease.
type TenantGuard struct {
	Tenant string `json:"tenant"`
}

// GlobalGroup is a named group on a pool: allocations of the tenants it
// grants that name it (Allocation.GlobalGroup) share one address per
// family, so that several clusters announce one Service address (anycast,
// ECMP across clusters). The address is taken when the first member joins
// and freed when the last leaves; the claims of its addresses (Claim.Group)
// list every member, and are the only record of who holds it.
type GlobalGroup struct {
	Pool        string    `json:"pool"`
	ID          string    `json:"id"`
	UID         string    `json:"uid"`
	Description string    `json:"description,omitempty"`
	Tenants     []string  `json:"tenants,omitempty"`
	CreateTime  time.Time `json:"createTime"`
	UpdateTime  time.Time `json:"updateTime"`
}

// Key returns the group's ID in storage, "pool/group".
func (g *GlobalGroup) Key() string { return g.Pool + "/" + g.ID }

// Grants reports whether tenant may join the group.
func (g *GlobalGroup) Grants(tenant string) bool {
	for _, t := range g.Tenants {
		if t == tenant {
			return true
		}
	}
	return false
}

// TokenHash finds a token by the hash of its secret.
type TokenHash struct {
	Token string `json:"token"`
}
