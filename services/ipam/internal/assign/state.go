package assign

import (
	"iter"
	"net/netip"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// State is what a decision reads of a replica's state: the index, held
// still (under its lock) for the length of one decision.
type State interface {
	// Allocation returns the allocation "tenant/id" and its revision.
	Allocation(id string) (*ipam.Allocation, int64, bool)
	// Hold returns the hold of the released allocation "tenant/id".
	Hold(id string) (*ipam.Hold, bool)
	// HoldsOf returns the holds of a tenant, in no order.
	HoldsOf(tenant string) []*ipam.Hold
	// Claim returns the claim of an address.
	Claim(addr netip.Addr) (*ipam.Claim, bool)
	// SharedUnder returns the claimed addresses indexed under a sharing
	// key (see ClaimShareKey), in no order.
	SharedUnder(k ShareKey) iter.Seq[netip.Addr]
	// Rev returns the revision of r, 0 if the state does not hold it: the
	// condition a change that read r commits on.
	Rev(r ipam.Ref) int64
	// Pools returns the pools in name order.
	Pools() []*ipam.Pool
	// Pool returns a pool by name.
	Pool(name string) (Pool, bool)
	// PoolOf returns the pool whose addresses include addr.
	PoolOf(addr netip.Addr) (Pool, bool)
	// Group returns a global group by "pool/group".
	Group(key string) (*ipam.GlobalGroup, bool)
	// Tenant returns a tenant's quota and what counts against it.
	Tenant(tenant string) TenantUse
	// Reserved returns, for an address a decision being committed took,
	// a channel closed when that commit is settled.
	Reserved(addr netip.Addr) (<-chan struct{}, bool)
	// Reservations returns every reserved address with its channel.
	Reservations() iter.Seq2[netip.Addr, <-chan struct{}]
	// InFlight returns, for a sharing key a decision being committed
	// allocates under, a channel closed when that commit is settled.
	InFlight(k ShareKey) (<-chan struct{}, bool)
}

// Pool is one pool with its free addresses and its held ones.
type Pool interface {
	Spec() *ipam.Pool
	HasFamily(f ipam.Family) bool
	Contains(addr netip.Addr) bool
	// LowestFree returns the lowest free address of family f.
	LowestFree(f ipam.Family) (netip.Addr, bool)
	// LowestFreeN returns the n lowest free addresses of family f.
	LowestFreeN(f ipam.Family, n int) ([]netip.Addr, bool)
	// LowestHeldN returns the n lowest addresses of family f kept for
	// released owners.
	LowestHeldN(f ipam.Family, n int) ([]netip.Addr, bool)
}

// TenantUse is a tenant's quota (0: none) and the addresses that count
// against it.
type TenantUse struct {
	Quota uint64
	// Used is what its allocations hold; Adding what decisions being
	// committed add; Held what its holds keep.
	Used, Adding, Held uint64
}

// ShareKey is what addresses are shared under: a tenant's sharing key, or
// a global group's "pool/group" under the empty tenant (no tenant has an
// empty ID).
type ShareKey struct{ Tenant, Key string }

// GroupShareKey returns the key of a global group's addresses.
func GroupShareKey(group string) ShareKey { return ShareKey{"", group} }

// ClaimShareKey returns the key a claim is shared under: its global
// group's, or its tenant's sharing key; ok false if neither.
func ClaimShareKey(c *ipam.Claim) (ShareKey, bool) {
	switch {
	case c.Group != "":
		return GroupShareKey(c.Group), true
	case c.SharingKey != "":
		return ShareKey{c.Tenant, c.SharingKey}, true
	}
	return ShareKey{}, false
}

// allocShareKey returns the key under which an allocation shares
// addresses: its global group's or its sharing key's; ok false if neither.
func allocShareKey(a *ipam.Allocation) (ShareKey, bool) {
	switch {
	case a.GlobalGroup != "":
		return GroupShareKey(a.GlobalGroup), true
	case a.SharingKey != "":
		return ShareKey{a.Tenant, a.SharingKey}, true
	}
	return ShareKey{}, false
}

// Decision is a proposed change to the state. The caller reserves its
// Takes and Share while it commits Change (see index.Index.Decide).
type Decision struct {
	// Reclaims is set when the decision takes addresses held for a
	// released owner because its pool had nothing else: a decision on the
	// whole pool that no condition of the change guards, so the caller
	// makes it on a view caught up with etcd.
	Reclaims bool
	// Existing is set when the owner already holds an allocation that
	// satisfies the request: nothing to commit.
	Existing *ipam.Allocation
	// Alloc is the allocation the change writes (nil for deletions).
	Alloc *ipam.Allocation
	// Before is the allocation or hold the change ends, for audit.
	Before *ipam.Allocation
	// Change is what to commit.
	Change ipam.Change
	// Takes are the free addresses the decision takes, with their pools:
	// no other decision may take them until this one is settled.
	Takes []Take
	// Share is set when the decision allocates under a sharing key:
	// another decision under it waits until this one is settled.
	Share *ShareKey
	// Adds is how many addresses the decision adds to its tenant's
	// (Alloc's) count while it is in flight.
	Adds uint64
}

// Take is a free address a decision takes from a pool.
type Take struct {
	Addr netip.Addr
	Pool string
}

// Pending is returned when a decision being committed decides what this
// one may get: the caller waits for Done and decides again. Either the
// other decision allocates under the same sharing key (the two then share
// one address, when their ports allow, instead of taking two), or it has
// reserved an address this one needs: the last free ones of a family, or
// the one requested. The reservation may still fail, so the pool is
// neither exhausted nor the address in use (and no hold is reclaimed)
// until it is settled.
type Pending struct {
	Done <-chan struct{}
}

func (e *Pending) Error() string {
	return "an allocation being committed holds what this one needs"
}

// builder accumulates a decision.
type builder struct {
	st     State
	d      *Decision
	claims map[netip.Addr]*ipam.Claim // the claims the decision writes
}

func newBuilder(st State, d *Decision) *builder {
	return &builder{st: st, d: d, claims: make(map[netip.Addr]*ipam.Claim)}
}

func (b *builder) cond(r ipam.Ref) {
	for _, c := range b.d.Change.Conds {
		if c.Ref == r {
			return
		}
	}
	b.d.Change.Conds = append(b.d.Change.Conds, ipam.Cond{Ref: r, Rev: b.st.Rev(r)})
}

func (b *builder) put(r ipam.Ref, v any) {
	b.cond(r)
	b.d.Change.Puts = append(b.d.Change.Puts, ipam.Put{Ref: r, Value: v})
}

func (b *builder) del(r ipam.Ref) {
	b.cond(r)
	b.d.Change.Deletes = append(b.d.Change.Deletes, r)
}
