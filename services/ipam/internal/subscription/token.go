package subscription

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// tokenPrefix names the token's format: a new format gets a new prefix,
// and a replica that does not know a token's prefix sends a snapshot.
const tokenPrefix = "p1."

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
	d := digest(p)
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(d[:])
}

// parseToken returns the digest a token carries, or false for an empty,
// malformed or unknown one.
func parseToken(tok string) ([sha256.Size]byte, bool) {
	var d [sha256.Size]byte
	rest, ok := strings.CutPrefix(tok, tokenPrefix)
	if !ok {
		return d, false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) != len(d) {
		return d, false
	}
	copy(d[:], b)
	return d, true
}

// digest hashes a plan's content, its lists in a canonical order (by peer,
// by route and peer, by address) so that equal plans hash alike however
// they were built.
func digest(p *ipam.NodePlan) [sha256.Size]byte {
	p = canonical(p)
	h := sha256.New()
	// An encoding error cannot happen for a plan (plain values); it would
	// only make the digest match nothing, which costs a snapshot.
	_ = json.NewEncoder(h).Encode(p)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

func cmpPeer(a, b ipam.PlanPeer) int {
	if a.Peer == nil || b.Peer == nil {
		return cmp.Compare(boolInt(a.Peer != nil), boolInt(b.Peer != nil))
	}
	return strings.Compare(a.Peer.ID, b.Peer.ID)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}


func cmpL2(a, b ipam.PlanL2) int { return a.Addr.Compare(b.Addr) }

// canonical returns p with its lists sorted (p itself when they are).
func canonical(p *ipam.NodePlan) *ipam.NodePlan {
	// Routes are sorted (ipam.Routes); JSON encodes them as a list.
	if slices.IsSortedFunc(p.Peers, cmpPeer) && slices.IsSortedFunc(p.L2, cmpL2) {
		return p
	}
	c := &ipam.NodePlan{Peers: slices.Clone(p.Peers), Routes: p.Routes, L2: slices.Clone(p.L2)}
	slices.SortStableFunc(c.Peers, cmpPeer)
	slices.SortStableFunc(c.L2, cmpL2)
	return c
}
