// Package reason is the table of every reason the adapter writes: on
// Events (of Services and of MetalLB's resources) and on the Synced
// condition of MetalLB's resources. Each is CamelCase, as Kubernetes
// reasons are, and means one thing, said next to it here.
//
// internal/kube, internal/lb and internal/request import this package; a
// reason written anywhere else is a bug (TestTable checks the spelling).
package reason

import "maps"

// Reasons on a Service's Events.
const (
	// IPAllocated: the Service was given its address, or kept the one its
	// status showed (migration from MetalLB).
	IPAllocated = "IPAllocated"
	// IPChanged: the Service's address changed (its request changed, or the
	// IPAM moved it).
	IPChanged = "IPChanged"
	// IPReleased: the Service's address was given back (the Service was
	// deleted or is no longer a LoadBalancer of the adapter's class).
	IPReleased = "IPReleased"
	// IPNotKept: the address in the Service's status could not be kept
	// (another Service holds it, it is in no pool, or the pool does not
	// serve the Service); the Service got another one.
	IPNotKept = "IPNotKept"
	// AllocationUpdated: the allocation's labels, ports or traffic policy
	// were brought up to date.
	AllocationUpdated = "AllocationUpdated"
	// AllocationFailed: the Service got no address; the message says why
	// and what to do.
	AllocationFailed = "AllocationFailed"
	// ReleaseFailed: giving back the Service's address failed; retried.
	ReleaseFailed = "ReleaseFailed"
	// PoolDeleted: the pool the Service's address came from was deleted;
	// the address is gone (as with MetalLB) and the Service gets another one
	// if another pool serves it.
	PoolDeleted = "PoolDeleted"
	// AddressConflict: another host on the segment uses one of the
	// Service's L2 addresses (the IPAM's Conflict condition); the message
	// names the host's MAC and whether the node answers for the address.
	AddressConflict = "AddressConflict"
	// DeprecatedAnnotation: the Service uses a metallb.universe.tf/
	// annotation; it works, the metallb.io/ or beacon.io/ one is preferred.
	DeprecatedAnnotation = "DeprecatedAnnotation"
	// ConflictingAnnotations: the same setting is given twice with
	// different values; the message says which one is used.
	ConflictingAnnotations = "ConflictingAnnotations"
	// InvalidAnnotation: an annotation's value cannot be used; nothing is
	// allocated until it is fixed.
	InvalidAnnotation = "InvalidAnnotation"
	// InvalidService: a field of the Service's spec cannot be used.
	InvalidService = "InvalidService"
)

// Reasons on a MetalLB resource's Events and Synced condition.
const (
	// Synced: the resource is in the IPAM as it asks.
	Synced = "Synced"
	// PartlySupported: in the IPAM, but some fields Beacon does not support
	// are ignored (named in the message).
	PartlySupported = "PartlySupported"
	// ImportFailed: the resource could not be applied to the IPAM (Event;
	// the Synced condition carries the precise reason).
	ImportFailed = "ImportFailed"
	// InvalidSpec: the resource's spec is malformed (a bad CIDR, a reversed
	// range, an unknown field value).
	InvalidSpec = "InvalidSpec"
	// PoolIDTaken: the IPAM pool ID an IPAddressPool maps to
	// ("{tenant}-{name}") is another cluster's pool (tenant "a-b"'s pool
	// "c" and tenant "a"'s pool "b-c" are both "a-b-c").
	PoolIDTaken = "PoolIDTaken"
)

// Reasons for what the IPAM refused or failed to do, on Events and
// conditions alike (see lb.Explain).
const (
	// AddressInUse: a requested address is held by another Service.
	AddressInUse = "AddressInUse"
	// AddressHeld: a requested address is kept for a deleted Service (a
	// release hold); the message names whose it was and when it ends.
	AddressHeld = "AddressHeld"
	// AddressNotInPool: a requested address is in no pool.
	AddressNotInPool = "AddressNotInPool"
	// PoolExhausted: no free address in the pools that serve the Service.
	PoolExhausted = "PoolExhausted"
	// PoolNotFound: the requested pool does not exist.
	PoolNotFound = "PoolNotFound"
	// GlobalGroupNotFound: the global group of the beacon.io/global-group
	// annotation does not exist.
	GlobalGroupNotFound = "GlobalGroupNotFound"
	// NotAllowed: the pool does not serve this Service (namespace, labels,
	// family) or the request is not possible as asked.
	NotAllowed = "NotAllowed"
	// QuotaExceeded: the cluster's tenant holds as many addresses as its
	// quota allows.
	QuotaExceeded = "QuotaExceeded"
	// PoolOverlap: the pool overlaps another pool.
	PoolOverlap = "PoolOverlap"
	// PoolInUse: the pool change would take away addresses that are
	// allocated or held; the message lists them.
	PoolInUse = "PoolInUse"
	// InUse: the resource is used by another one (named in the message).
	InUse = "InUse"
	// IPAMUnavailable: the IPAM could not be reached or was busy; retried.
	IPAMUnavailable = "IPAMUnavailable"
	// IPAMRefused: the IPAM refused for a reason not listed above; the
	// message is the IPAM's.
	IPAMRefused = "IPAMRefused"
)

// Meaning returns the table: every reason above and what it means (a
// copy: the caller owns it).
func Meaning() map[string]string { return maps.Clone(meaning) }

// meaning is the table Meaning hands out copies of.
var meaning = map[string]string{
	IPAllocated:            "the Service was given its address, or kept the one in its status",
	IPChanged:              "the Service's address changed",
	IPReleased:             "the Service's address was given back",
	IPNotKept:              "the address in the Service's status could not be kept",
	AllocationUpdated:      "the allocation's labels, ports or traffic policy were updated",
	AllocationFailed:       "the Service got no address; the message says why",
	ReleaseFailed:          "giving back the Service's address failed; retried",
	PoolDeleted:            "the Service's pool was deleted, and with it its address",
	AddressConflict:        "another host on the segment uses one of the Service's addresses",
	DeprecatedAnnotation:   "a metallb.universe.tf/ annotation is used",
	ConflictingAnnotations: "one setting is given twice with different values",
	InvalidAnnotation:      "an annotation's value cannot be used",
	InvalidService:         "a field of the Service's spec cannot be used",
	Synced:                 "the MetalLB resource is in the IPAM as it asks",
	PartlySupported:        "the MetalLB resource is in the IPAM, some fields ignored",
	ImportFailed:           "the MetalLB resource could not be applied to the IPAM",
	InvalidSpec:            "the MetalLB resource's spec is malformed",
	PoolIDTaken:            "the IPAddressPool's IPAM pool ID is another tenant's pool",
	AddressInUse:           "a requested address is held by another Service",
	AddressHeld:            "a requested address is kept for a deleted Service until its hold ends",
	AddressNotInPool:       "a requested address is in no pool",
	PoolExhausted:          "no free address in the pools that serve the Service",
	PoolNotFound:           "the requested pool does not exist",
	GlobalGroupNotFound:    "the global group the Service names does not exist",
	NotAllowed:             "the pool does not serve the Service, or the request is impossible",
	QuotaExceeded:          "the tenant's address quota is used up",
	PoolOverlap:            "the pool overlaps another pool",
	PoolInUse:              "the pool change would take away allocated or held addresses",
	InUse:                  "the resource is used by another one",
	IPAMUnavailable:        "the IPAM could not be reached or was busy; retried",
	IPAMRefused:            "the IPAM refused for another reason",
}
