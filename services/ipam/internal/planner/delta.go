package planner

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Diff returns the change that turns plan old into plan new, either of which
// may be nil (no plan). Entries are compared by value: a peer whose resource
// changed in any field is upserted. Use it when nodes, peers or
// advertisements change and plans are recomputed in full. Cost:
// O(|old|+|new|), both being sorted as Plans sorts them, except for routes
// that share chunks (one plan made from the other by Apply): those are
// skipped (see ipam.Routes.Diff).
func Diff(old, new *ipam.NodePlan) *Delta {
	if old == nil {
		old = &ipam.NodePlan{}
	}
	if new == nil {
		new = &ipam.NodePlan{}
	}
	d := &Delta{}
	walk(old.Peers, new.Peers, func(a, b ipam.PlanPeer) int { return strings.Compare(a.Peer.ID, b.Peer.ID) },
		func(p ipam.PlanPeer) { d.RemovePeers = append(d.RemovePeers, p.Peer.ID) },
		func(p ipam.PlanPeer) { d.UpsertPeers = append(d.UpsertPeers, p) },
		func(a, b ipam.PlanPeer) bool { return peerEqual(a, b) })
	d.UpsertRoutes, d.RemoveRoutes = old.Routes.Diff(new.Routes)
	walk(old.L2, new.L2, func(a, b ipam.PlanL2) int { return a.Addr.Compare(b.Addr) },
		func(l ipam.PlanL2) { d.RemoveL2 = append(d.RemoveL2, l.Addr) },
		func(l ipam.PlanL2) { d.UpsertL2 = append(d.UpsertL2, l) },
		l2Equal)
	return d
}

// walk merges two sorted lists, calling gone for entries only in old and
// upsert for entries only in new or different in new.
func walk[T any](old, new []T, cmp func(a, b T) int, gone, upsert func(T), equal func(a, b T) bool) {
	i, j := 0, 0
	for i < len(old) || j < len(new) {
		switch {
		case j == len(new) || i < len(old) && cmp(old[i], new[j]) < 0:
			gone(old[i])
			i++
		case i == len(old) || cmp(old[i], new[j]) > 0:
			upsert(new[j])
			j++
		default:
			if !equal(old[i], new[j]) {
				upsert(new[j])
			}
			i++
			j++
		}
	}
}

func peerEqual(a, b ipam.PlanPeer) bool {
	return (a.Peer == b.Peer || reflect.DeepEqual(a.Peer, b.Peer)) &&
		(a.BFD == b.BFD || reflect.DeepEqual(a.BFD, b.BFD))
}

func routeEqual(a, b ipam.PlanRoute) bool { return a.Equal(b) }

func l2Equal(a, b ipam.PlanL2) bool {
	return a.Addr == b.Addr && a.Allocation == b.Allocation && slices.Equal(a.Interfaces, b.Interfaces)
}

// Apply returns plan p (nil: empty) changed by d, as a new plan: p and its
// slices are not modified, so plans that share slices stay intact. Cost:
// O(|p|+|d|) when d is sorted as Diff and Affected return it, except for
// the routes: O(R/128 + 128) per changed chunk of them (see ipam.Routes).
func Apply(p *ipam.NodePlan, d *Delta) *ipam.NodePlan {
	if p == nil {
		p = &ipam.NodePlan{}
	}
	if d.Empty() {
		return &ipam.NodePlan{Peers: p.Peers, Routes: p.Routes, L2: p.L2}
	}
	return &ipam.NodePlan{
		Peers: patch(p.Peers, d.UpsertPeers, d.RemovePeers,
			func(x ipam.PlanPeer) string { return x.Peer.ID }, strings.Compare),
		Routes: p.Routes.Patch(d.UpsertRoutes, d.RemoveRoutes),
		L2: patch(p.L2, d.UpsertL2, d.RemoveL2,
			func(l ipam.PlanL2) netip.Addr { return l.Addr }, func(a, b netip.Addr) int { return a.Compare(b) }),
	}
}

// patch returns the sorted list cur with the entries keyed in remove dropped
// and those of upsert put in place; upsert and remove are sorted by key.
func patch[T, K any](cur, upsert []T, remove []K, key func(T) K, cmp func(a, b K) int) []T {
	if len(upsert) == 0 && len(remove) == 0 {
		return cur
	}
	out := make([]T, 0, len(cur)+len(upsert))
	i, j, r := 0, 0, 0
	for i < len(cur) || j < len(upsert) {
		var next T
		switch {
		case j == len(upsert) || i < len(cur) && cmp(key(cur[i]), key(upsert[j])) < 0:
			next = cur[i]
			i++
		case i == len(cur) || cmp(key(cur[i]), key(upsert[j])) > 0:
			next = upsert[j]
			j++
		default:
			next = upsert[j]
			i++
			j++
		}
		k := key(next)
		for r < len(remove) && cmp(remove[r], k) < 0 {
			r++
		}
		if r < len(remove) && cmp(remove[r], k) == 0 {
			continue
		}
		out = append(out, next)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
