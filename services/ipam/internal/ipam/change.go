package ipam

// Kind is the kind of a stored object.
type Kind uint8

// The stored kinds. The first four are the IPAM's state, watched by every
// replica; audit and request records are a log, read on demand.
const (
	KindPool Kind = iota + 1
	KindAllocation
	KindClaim
	KindHold
	KindAudit
	KindRequest
	KindL2Advertisement
	KindBGPAdvertisement
	KindBGPPeer
	KindBFDProfile
	KindCommunity
	// KindNode is an announcer's registration (live while its lease lasts)
	// or drain mark.
	KindNode
	// KindL2Owner records which node answers ARP/NDP for an address: one
	// record per address, as versions before KindL2OwnerSet wrote them
	// (read, and rewritten as sets by the elected replica).
	KindL2Owner
	// KindDrain marks a node drained.
	KindDrain
	KindTenant
	KindToken
	KindTokenHash
	// KindShare guards a sharing key: an allocation that takes a new
	// address under the key writes it, so that two replicas cannot both
	// take one for the key at the same instant (see Share).
	KindShare
	// KindTenantGuard guards a tenant's quota: every allocation of a
	// tenant with a quota writes it (see TenantGuard).
	KindTenantGuard
	// KindClusterNode is what a tenant's cluster says about a node (its
	// labels), kept independently of the node's announcer.
	KindClusterNode
	// KindGlobalGroup is a named group on a pool whose members, of any
	// tenant granted to join, share one address per family (see
	// GlobalGroup).
	KindGlobalGroup
	// KindL2OwnerSet records the L2 addresses one node answers for in one
	// shard of a tenant's addresses (see L2OwnerSet).
	KindL2OwnerSet
	// KindLeadership is a replica's key in an election (see Leadership): a
	// change that compares it commits only while that replica still leads.
	KindLeadership
)

// Ref names one stored object: its kind and its ID within the kind (a pool's
// name; "tenant/id" for allocations, holds, audit and request records; the
// address for claims).
type Ref struct {
	Kind Kind
	ID   string
}

// Cond is a precondition of a Change: the object's last modification
// revision must equal Rev; Rev 0 means the object must not exist.
type Cond struct {
	Ref Ref
	Rev int64
}

// Put writes an object: one of *Pool, *Allocation, *Claim, *Hold,
// *AuditRecord, *RequestRecord, matching Ref.Kind.
type Put struct {
	Ref   Ref
	Value any
	// Alone keeps an audit record under a key of its own, never packed
	// with the transaction's other records: its ID was listed before it
	// was written (see Allocation.Created), so the key must be that ID.
	Alone bool
}

// Change is a set of writes committed atomically if all its conditions
// hold. The refs it writes must be distinct.
type Change struct {
	Conds   []Cond
	Puts    []Put
	Deletes []Ref
	// Unchanged are range conditions; see RangeCond.
	Unchanged []RangeCond
}

// Event is an object as of a revision: Value nil means deleted. Watches
// that keep deleted objects' last value set Deleted instead.
type Event struct {
	Ref     Ref
	Value   any
	Rev     int64
	Deleted bool
}

// RangeCond is a precondition over a range of objects of one kind: no
// object from From to To (inclusive) may have been created or changed after
// revision Since. Empty IDs in both refs mean every object of the kind.
// Changes with range conditions are committed on their own.
type RangeCond struct {
	From, To Ref
	Since    int64
}

// Page is one page of a listing read from storage.
type Page struct {
	Items []Event
	// Revision is the revision the page was read at.
	Revision int64
	// More is set when objects remain after the last item.
	More bool
}
