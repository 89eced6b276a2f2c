package subscription

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/planner"
)

// tokenPrefix names the token's format: a new format gets a new prefix,
// and a replica that does not know a token's prefix sends a snapshot. "p1."
// was a SHA-256 of the whole plan's JSON, which cost every session O(R)
// per change; "p2." is the sum below, which a change updates in O(change).
const tokenPrefix = "p2."

// Token is the resume token of a plan: a digest of its content. The IPAM
// sends it with every plan message, for the plan the node holds once it
// has applied that message; a node that reconnects sends the last one back
// in its hello. Any replica can check it: replicas share only etcd, and
// each computes a node's plan from it, so a replica whose plan for the
// node has the same digest knows the node holds it, and sends an empty
// change instead of a snapshot. It carries no secret and grants nothing:
// a forged or stale token only costs its node a snapshot.
func Token(p *ipam.NodePlan) string {
	if p == nil {
		return ""
	}
	return digestOf(p).token()
}

// tokens computes the tokens of one session's plan messages, each from the
// last one and the change, not from the whole plan.
type tokens struct {
	plan *ipam.NodePlan // the plan of the last message, nil before the first
	d    digest         // its digest
}

// next returns the token of plan, which the node holds once it has
// applied a message with snap (its whole plan) or delta (the change from
// the plan of the last message). Cost: the plan's size for the first
// message and a snapshot, the change's for a change.
func (t *tokens) next(plan, snap *ipam.NodePlan, delta *planner.Delta) string {
	switch {
	case plan == nil:
		t.plan = nil
		return ""
	case t.plan == nil || snap != nil || delta == nil:
		t.d = digestOf(plan)
	default:
		t.d = t.d.apply(t.plan, delta)
	}
	t.plan = plan
	return t.d.token()
}

// parseToken returns the digest a token carries, or false for an empty,
// malformed or unknown one.
func parseToken(tok string) (digest, bool) {
	var d digest
	rest, ok := strings.CutPrefix(tok, tokenPrefix)
	if !ok {
		return d, false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) != 8*len(d) {
		return d, false
	}
	for i := range d {
		d[i] = binary.BigEndian.Uint64(b[8*i:])
	}
	return d, true
}

// digest is a plan's digest: the sum, in four lanes of 64 bits each (mod
// 2^64), of the SHA-256 of every entry of the plan (each peer, route and
// L2 address, encoded by entryHash). Being a sum, it does not depend on the
// order of the entries, and a change of k entries updates it in O(k)
// (apply) rather than hashing the whole plan again. Equal plans have equal
// digests; different plans have equal ones only by a collision of sums of
// SHA-256 values.
type digest [4]uint64

func (d digest) token() string {
	b := make([]byte, 0, 8*len(d))
	for _, w := range d {
		b = binary.BigEndian.AppendUint64(b, w)
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// add adds an entry's hash to d; sub takes it out.
func (d *digest) add(h [sha256.Size]byte) {
	for i := range d {
		d[i] += binary.BigEndian.Uint64(h[8*i:])
	}
}

func (d *digest) sub(h [sha256.Size]byte) {
	for i := range d {
		d[i] -= binary.BigEndian.Uint64(h[8*i:])
	}
}

// digestOf hashes every entry of p. Cost: one SHA-256 per entry.
func digestOf(p *ipam.NodePlan) digest {
	var d digest
	var buf []byte
	for _, x := range p.Peers {
		d.add(peerHash(x))
	}
	for r := range p.Routes.All() {
		d.add(routeHash(&buf, r))
	}
	for _, l := range p.L2 {
		d.add(l2Hash(&buf, l))
	}
	return d
}

// apply returns the digest of plan old changed by delta, d being old's.
// Cost: O(k log R) for a delta of k entries.
func (d digest) apply(old *ipam.NodePlan, delta *planner.Delta) digest {
	var buf []byte
	peer := func(id string) (ipam.PlanPeer, bool) {
		i := slices.IndexFunc(old.Peers, func(p ipam.PlanPeer) bool { return p.Peer != nil && p.Peer.ID == id })
		if i < 0 {
			return ipam.PlanPeer{}, false
		}
		return old.Peers[i], true
	}
	for _, id := range delta.RemovePeers {
		if p, ok := peer(id); ok {
			d.sub(peerHash(p))
		}
	}
	goneP := keySet(delta.RemovePeers, delta.UpsertPeers)
	for _, p := range delta.UpsertPeers {
		if p.Peer != nil && goneP[p.Peer.ID] {
			continue // removed: a removal wins, as in planner.Apply
		}
		if p.Peer != nil {
			if o, ok := peer(p.Peer.ID); ok {
				d.sub(peerHash(o))
			}
		}
		d.add(peerHash(p))
	}
	route := func(k ipam.RouteKey) (ipam.PlanRoute, bool) {
		for _, r := range old.Routes.Prefix(k.Prefix) {
			if r.Peer == k.Peer {
				return r, true
			}
		}
		return ipam.PlanRoute{}, false
	}
	for _, k := range delta.RemoveRoutes {
		if r, ok := route(k); ok {
			d.sub(routeHash(&buf, r))
		}
	}
	goneR := keySet(delta.RemoveRoutes, delta.UpsertRoutes)
	for _, r := range delta.UpsertRoutes {
		if goneR[r.Key()] {
			continue
		}
		if o, ok := route(r.Key()); ok {
			d.sub(routeHash(&buf, o))
		}
		d.add(routeHash(&buf, r))
	}
	l2 := func(addr netip.Addr) (ipam.PlanL2, bool) {
		i, found := slices.BinarySearchFunc(old.L2, addr, func(l ipam.PlanL2, a netip.Addr) int { return l.Addr.Compare(a) })
		if !found {
			return ipam.PlanL2{}, false
		}
		return old.L2[i], true
	}
	for _, addr := range delta.RemoveL2 {
		if l, ok := l2(addr); ok {
			d.sub(l2Hash(&buf, l))
		}
	}
	goneL := keySet(delta.RemoveL2, delta.UpsertL2)
	for _, l := range delta.UpsertL2 {
		if goneL[l.Addr] {
			continue
		}
		if o, ok := l2(l.Addr); ok {
			d.sub(l2Hash(&buf, o))
		}
		d.add(l2Hash(&buf, l))
	}
	return d
}

// keySet is the set of keys, or nil when there are no upserts to check
// against it.
func keySet[K comparable, T any](keys []K, upserts []T) map[K]bool {
	if len(keys) == 0 || len(upserts) == 0 {
		return nil
	}
	m := make(map[K]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// The entries' encodings, each tagged with its kind: a peer as JSON (a
// node has few), a route and an L2 address in a binary form, every
// variable-length field preceded by its length.

func peerHash(p ipam.PlanPeer) [sha256.Size]byte {
	// An encoding error cannot happen for a peer (plain values); it would
	// only make the digest match nothing, which costs a snapshot.
	b, _ := json.Marshal(p)
	return sha256.Sum256(append([]byte{'p'}, b...))
}

func routeHash(buf *[]byte, r ipam.PlanRoute) [sha256.Size]byte {
	b := append((*buf)[:0], 'r')
	b = appendAddr(b, r.Prefix.Addr())
	b = append(b, byte(r.Prefix.Bits()+1)) // -1 (invalid) is 0
	b = appendString(b, r.Peer)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Communities)))
	for _, c := range r.Communities {
		b = binary.BigEndian.AppendUint32(b, c)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.LargeCommunities)))
	for _, c := range r.LargeCommunities {
		for _, w := range c {
			b = binary.BigEndian.AppendUint32(b, w)
		}
	}
	b = binary.BigEndian.AppendUint32(b, r.LocalPref)
	b = binary.BigEndian.AppendUint32(b, r.MED)
	b = binary.BigEndian.AppendUint32(b, r.ASPathPrepend)
	*buf = b
	return sha256.Sum256(b)
}

func l2Hash(buf *[]byte, l ipam.PlanL2) [sha256.Size]byte {
	b := append((*buf)[:0], 'l')
	b = appendAddr(b, l.Addr)
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.Interfaces)))
	for _, i := range l.Interfaces {
		b = appendString(b, i)
	}
	b = appendString(b, l.Allocation)
	*buf = b
	return sha256.Sum256(b)
}

// appendAddr appends an address's family (0 for the zero Addr, 4 or 6) and
// 16-byte form.
func appendAddr(b []byte, a netip.Addr) []byte {
	switch {
	case a.Is4():
		b = append(b, 4)
	case a.Is6():
		b = append(b, 6)
	default:
		b = append(b, 0)
	}
	x := a.As16()
	return append(b, x[:]...)
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}
