package planner

import (
	"net/netip"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Input is everything one tenant's plans depend on. The planner only reads
// it. IDs (of pools, advertisements, peers, communities) and node names are
// unique, as their storage keys make them.
type Input struct {
	// Pools by ID, for advertisements' pool label selectors and for the
	// ranges that bound BGP aggregation. They may be every pool, not only
	// the tenant's.
	Pools map[string]*ipam.Pool
	// Allocations are the tenant's allocations, in any order.
	Allocations []*ipam.Allocation
	// L2 are the tenant's L2 advertisements.
	L2 []*ipam.L2Advertisement
	// BGP are the tenant's BGP advertisements.
	BGP []*ipam.BGPAdvertisement
	// Peers are the tenant's BGP peers.
	Peers []*ipam.BGPPeer
	// BFD are the tenant's BFD profiles, by ID.
	BFD map[string]*ipam.BFDProfile
	// Communities are the tenant's community alias sets.
	Communities []*ipam.Community
	// Nodes are the tenant's known nodes: live (subscribed) or not,
	// draining or not, with their labels and interfaces.
	Nodes []*ipam.Node
	// L2Owners is the node currently answering for each L2 address: the
	// input that makes ownership sticky. Missing entries have no owner.
	L2Owners map[netip.Addr]string
}

// Warning is configuration that cannot work as written, found by Check. It
// is meant to become a Condition on the resource it names.
type Warning struct {
	// Resource is the resource at fault, as the API names it under its
	// tenant: "l2Advertisements/x", "bgpAdvertisements/x", "bgpPeers/x" or
	// "communities/x".
	Resource string
	// Reason is a CamelCase reason, e.g. "NoCommonNode".
	Reason string
	// Message explains the warning to people.
	Message string
}

// RouteKey names a route in a node's plan: one prefix to one peer.
type RouteKey = ipam.RouteKey

// Delta is a change to one node's plan, in the shape of the announcer
// stream's PlanChange: upserts replace the entry with the same key (peer ID,
// route key, address), removals name entries to drop. Every list is sorted by
// its key and names each key at most once; no key is both upserted and
// removed.
//
// For an L2 address that moves, the new owner's delta holds the upsert and
// the old owner's the removal: send the upsert first, so that the new owner
// answers before the old one stops (as DrainAnnouncer promises).
type Delta struct {
	// UpsertPeers are sessions added or changed, by peer ID.
	UpsertPeers []ipam.PlanPeer
	// RemovePeers are the IDs of peers whose sessions end.
	RemovePeers []string
	// UpsertRoutes are routes added or whose attributes changed.
	UpsertRoutes []ipam.PlanRoute
	// RemoveRoutes are routes withdrawn.
	RemoveRoutes []RouteKey
	// UpsertL2 are addresses the node starts answering for, or answers
	// for on other interfaces or for another allocation.
	UpsertL2 []ipam.PlanL2
	// RemoveL2 are addresses the node stops answering for.
	RemoveL2 []netip.Addr
}

// Empty reports whether d changes nothing.
func (d *Delta) Empty() bool {
	return d == nil || len(d.UpsertPeers)+len(d.RemovePeers)+len(d.UpsertRoutes)+
		len(d.RemoveRoutes)+len(d.UpsertL2)+len(d.RemoveL2) == 0
}
