package ipam

import (
	"encoding/json"
	"iter"
	"net/netip"
	"slices"
	"strings"
)

// RouteKey identifies a route in a node's plan: a prefix to one peer.
type RouteKey struct {
	// Prefix is the announced prefix.
	Prefix netip.Prefix
	// Peer is the BGPPeer ID.
	Peer string
}

// CompareRouteKeys orders route keys by prefix (address, then length), then
// peer ID: the order of a plan's routes.
func CompareRouteKeys(a, b RouteKey) int {
	if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
		return c
	}
	if c := a.Prefix.Bits() - b.Prefix.Bits(); c != 0 {
		return c
	}
	return strings.Compare(a.Peer, b.Peer)
}

// Key returns the route's key.
func (r PlanRoute) Key() RouteKey { return RouteKey{r.Prefix, r.Peer} }

// routeChunk is the number of routes a chunk of Routes is cut to: a change
// copies the chunks it touches (up to 2·routeChunk routes each) and the list
// of chunks (R/routeChunk entries), never the whole list.
const routeChunk = 128

// Routes is a node's routes, sorted by key (CompareRouteKeys), each key at
// most once. It is immutable: Patch returns a new list that shares the
// chunks it does not change with the old one, so that a change of a few
// routes costs O(R/128 + 128) rather than a copy of all R routes, and the
// nodes that see the same routes share one list. The zero value is empty.
type Routes struct {
	chunks [][]PlanRoute // none empty, each sorted, in order
	n      int
}

// RoutesOf returns the routes of sorted, a list sorted by key with each key
// at most once, which it keeps (read-only) rather than copies.
func RoutesOf(sorted []PlanRoute) Routes {
	var r Routes
	for len(sorted) > 0 {
		c := sorted[:min(len(sorted), routeChunk)]
		sorted = sorted[len(c):]
		r.chunks = append(r.chunks, slices.Clip(c))
		r.n += len(c)
	}
	return r
}

// Len returns the number of routes.
func (r Routes) Len() int { return r.n }

// All yields the routes in order.
func (r Routes) All() iter.Seq[PlanRoute] {
	return func(yield func(PlanRoute) bool) {
		for _, c := range r.chunks {
			for _, x := range c {
				if !yield(x) {
					return
				}
			}
		}
	}
}

// Slice returns the routes in order, in a new slice (nil when there are
// none).
func (r Routes) Slice() []PlanRoute {
	if r.n == 0 {
		return nil
	}
	out := make([]PlanRoute, 0, r.n)
	for _, c := range r.chunks {
		out = append(out, c...)
	}
	return out
}

// Same reports whether r and o are the same list, not only equal ones: one
// made from the other by no change, or both from one list alike.
func (r Routes) Same(o Routes) bool {
	if r.n != o.n || len(r.chunks) != len(o.chunks) {
		return false
	}
	return r.n == 0 || &r.chunks[0] == &o.chunks[0]
}

// Equal reports whether r and o hold the same routes (attributes compared
// as by value).
func (r Routes) Equal(o Routes) bool {
	return r.Same(o) || r.n == o.n && slices.EqualFunc(r.Slice(), o.Slice(), PlanRoute.Equal)
}

// Equal reports whether r and o are the same route with the same
// attributes.
func (r PlanRoute) Equal(o PlanRoute) bool {
	return r.Prefix == o.Prefix && r.Peer == o.Peer && r.LocalPref == o.LocalPref &&
		r.MED == o.MED && r.ASPathPrepend == o.ASPathPrepend &&
		slices.Equal(r.Communities, o.Communities) && slices.Equal(r.LargeCommunities, o.LargeCommunities)
}

// chunkOf returns the index of the chunk where key k is or would go.
func (r Routes) chunkOf(k RouteKey) int {
	// The first chunk whose first key is above k, less one.
	i, _ := slices.BinarySearchFunc(r.chunks, k, func(c []PlanRoute, k RouteKey) int {
		if CompareRouteKeys(c[0].Key(), k) <= 0 {
			return -1
		}
		return 1
	})
	return max(i-1, 0)
}

// Prefix returns the routes of prefix p, in order, one per peer. The
// result may share memory with r: read-only.
func (r Routes) Prefix(p netip.Prefix) []PlanRoute {
	if r.n == 0 {
		return nil
	}
	start := RouteKey{Prefix: p}
	var out []PlanRoute
	for ci := r.chunkOf(start); ci < len(r.chunks); ci++ {
		c := r.chunks[ci]
		i, _ := slices.BinarySearchFunc(c, start, func(x PlanRoute, k RouteKey) int { return CompareRouteKeys(x.Key(), k) })
		j := i
		for j < len(c) && c[j].Prefix == p {
			j++
		}
		if out == nil && j < len(c) {
			return c[i:j] // all in this chunk
		}
		out = append(out, c[i:j]...)
		if j < len(c) {
			break
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Patch returns r with the routes keyed in remove dropped and those of
// upsert put in place (replacing a route with the same key); upsert and
// remove are sorted by key. r is not modified. Cost: O(R/128) for the list
// of chunks, and O(128 + changes) for each chunk the change touches.
func (r Routes) Patch(upsert []PlanRoute, remove []RouteKey) Routes {
	if len(upsert) == 0 && len(remove) == 0 {
		return r
	}
	if r.n == 0 {
		return RoutesOf(patchRoutes(nil, upsert, remove))
	}
	// Which chunk each change goes to, in order: changes to one chunk are
	// contiguous in both lists.
	out := Routes{chunks: make([][]PlanRoute, 0, len(r.chunks)+1)}
	ui, ri := 0, 0
	for ci, c := range r.chunks {
		last := ci == len(r.chunks)-1
		// Changes below the next chunk's first key belong to this one.
		below := func(k RouteKey) bool {
			return last || CompareRouteKeys(k, r.chunks[ci+1][0].Key()) < 0
		}
		u0, r0 := ui, ri
		for ui < len(upsert) && below(upsert[ui].Key()) {
			ui++
		}
		for ri < len(remove) && below(remove[ri]) {
			ri++
		}
		if ui == u0 && ri == r0 {
			out.chunks = append(out.chunks, c)
			continue
		}
		next := patchRoutes(c, upsert[u0:ui], remove[r0:ri])
		for len(next) > 2*routeChunk {
			out.chunks = append(out.chunks, next[:routeChunk:routeChunk])
			next = next[routeChunk:]
		}
		if len(next) > 0 {
			out.chunks = append(out.chunks, next)
		}
	}
	out.chunks = mergeSmall(out.chunks)
	for _, c := range out.chunks {
		out.n += len(c)
	}
	if out.n == 0 {
		return Routes{}
	}
	return out
}

// mergeSmall joins chunks under a quarter of routeChunk with their next,
// so that removals do not leave the list in many tiny chunks. It modifies
// chunks (the new list), never the chunks' routes.
func mergeSmall(chunks [][]PlanRoute) [][]PlanRoute {
	out := chunks[:0]
	for _, c := range chunks {
		if k := len(out) - 1; k >= 0 && (len(out[k]) < routeChunk/4 || len(c) < routeChunk/4) && len(out[k])+len(c) <= 2*routeChunk {
			out[k] = slices.Concat(out[k], c)
			continue
		}
		out = append(out, c)
	}
	return out
}

// patchRoutes returns the sorted list cur with the routes keyed in remove
// dropped and those of upsert put in place, in a new slice.
func patchRoutes(cur, upsert []PlanRoute, remove []RouteKey) []PlanRoute {
	out := make([]PlanRoute, 0, len(cur)+len(upsert))
	i, j, k := 0, 0, 0
	for i < len(cur) || j < len(upsert) {
		var next PlanRoute
		switch {
		case j == len(upsert) || i < len(cur) && CompareRouteKeys(cur[i].Key(), upsert[j].Key()) < 0:
			next = cur[i]
			i++
		case i == len(cur) || CompareRouteKeys(cur[i].Key(), upsert[j].Key()) > 0:
			next = upsert[j]
			j++
		default:
			next = upsert[j]
			i++
			j++
		}
		key := next.Key()
		for k < len(remove) && CompareRouteKeys(remove[k], key) < 0 {
			k++
		}
		if k < len(remove) && CompareRouteKeys(remove[k], key) == 0 {
			continue
		}
		out = append(out, next)
	}
	return slices.Clip(out)
}

// Diff returns what turns r into o: the routes of o that r lacks or holds
// with other attributes (upsert), and the keys of the routes of r that o
// lacks (remove), both in key order. The chunks both lists share are
// skipped unread, so that for lists made one from the other by Patch the
// cost is O(R/128) and O(128) per changed chunk, not O(R).
func (r Routes) Diff(o Routes) (upsert []PlanRoute, remove []RouteKey) {
	if r.Same(o) {
		return nil, nil
	}
	a, b := routeCursor{r: r}, routeCursor{r: o}
	for {
		for a.i == 0 && b.i == 0 && !a.done() && !b.done() && sameChunk(a.r.chunks[a.c], b.r.chunks[b.c]) {
			a.c++
			b.c++
		}
		switch {
		case a.done() && b.done():
			return upsert, remove
		case b.done() || !a.done() && CompareRouteKeys(a.cur().Key(), b.cur().Key()) < 0:
			remove = append(remove, a.cur().Key())
			a.next()
		case a.done() || CompareRouteKeys(a.cur().Key(), b.cur().Key()) > 0:
			upsert = append(upsert, b.cur())
			b.next()
		default:
			if !a.cur().Equal(b.cur()) {
				upsert = append(upsert, b.cur())
			}
			a.next()
			b.next()
		}
	}
}

// routeCursor is a position in a Routes: route i of chunk c.
type routeCursor struct {
	r    Routes
	c, i int
}

func (x *routeCursor) done() bool     { return x.c == len(x.r.chunks) }
func (x *routeCursor) cur() PlanRoute { return x.r.chunks[x.c][x.i] }
func (x *routeCursor) next() {
	if x.i++; x.i == len(x.r.chunks[x.c]) {
		x.c, x.i = x.c+1, 0
	}
}

// sameChunk reports whether a and b are one chunk (not only equal ones).
func sameChunk(a, b []PlanRoute) bool { return len(a) == len(b) && &a[0] == &b[0] }

// MarshalJSON encodes the routes as a list.
func (r Routes) MarshalJSON() ([]byte, error) {
	s := r.Slice()
	if s == nil {
		s = []PlanRoute{}
	}
	return json.Marshal(s)
}

// UnmarshalJSON decodes a list of routes, sorting it by key.
func (r *Routes) UnmarshalJSON(b []byte) error {
	var s []PlanRoute
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	slices.SortStableFunc(s, func(a, b PlanRoute) int { return CompareRouteKeys(a.Key(), b.Key()) })
	*r = RoutesOf(s)
	return nil
}
