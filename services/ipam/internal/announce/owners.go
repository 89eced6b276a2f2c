package announce

import (
	"hash/fnv"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// L2 owners are recorded as owner sets (ipam.L2OwnerSet): one record per
// tenant, node and shard of the tenant's addresses, holding the addresses
// the node answers for in that shard. A move of many addresses rewrites a
// few sets per shard (the old owner's and the new owners'), each
// conditional on the revision of the set it replaces, instead of one
// record per address. Per-address records (ipam.L2Owner) of earlier
// versions are read as owners too; a set that holds an address wins over
// such a record, and the elected replica rewrites them into sets (the same
// owners), then deletes them.

// ownerShards is the number of shards of a tenant's addresses: a node has
// at most this many owner sets, and one address's move rewrites sets that
// hold about 1/ownerShards of its old and new owners' addresses.
const ownerShards = 32

// shardOf returns an address's shard. It is part of the stored format:
// the writer finds an address's set among its shard's, so it must never
// change.
func shardOf(addr netip.Addr) int {
	h := fnv.New32a()
	b := addr.Unmap().AsSlice()
	_, _ = h.Write(b)
	return int(h.Sum32() % ownerShards)
}

// setKey names a tenant's owner set.
type setKey struct {
	node  string
	shard int
}

// ownerSet is an owner set as recorded: its addresses (sorted) and the
// revision of its record (0: no record).
type ownerSet struct {
	addrs []netip.Addr
	rev   int64
}

// ownerEntry is a per-address owner record of an earlier version.
type ownerEntry struct {
	node string
	rev  int64
}

// applyOwnerSet stores an owner set record (v nil: deleted) and adds the
// addresses whose owner changes to the tenant's batch.
func (s *State) applyOwnerSet(id string, v any, rev int64) {
	name, node, shard, ok := ipam.ParseL2OwnerSetID(id)
	if !ok {
		return
	}
	t := s.tenant(name)
	k := setKey{node, shard}
	old := t.sets[k]
	for _, a := range old.addrs {
		if t.inSet[a] == k {
			delete(t.inSet, a)
		}
	}
	var addrs []netip.Addr
	if o, ok := v.(*ipam.L2OwnerSet); ok {
		addrs = o.Addrs
		t.sets[k] = ownerSet{addrs: addrs, rev: rev}
	} else {
		delete(t.sets, k)
	}
	for _, a := range addrs {
		t.inSet[a] = k
	}
	for _, a := range old.addrs {
		t.refreshOwner(a)
	}
	for _, a := range addrs {
		t.refreshOwner(a)
	}
}

// applyOwner stores a per-address L2 owner record of an earlier version
// (nil: deleted).
func (s *State) applyOwner(name, id string, v any, rev int64) {
	addr, err := netip.ParseAddr(strings.TrimPrefix(id, name+"/"))
	if err != nil {
		return
	}
	t := s.tenant(name)
	if o, ok := v.(*ipam.L2Owner); ok {
		t.legacy[addr] = ownerEntry{node: o.Node, rev: rev}
	} else {
		delete(t.legacy, addr)
	}
	t.refreshOwner(addr)
}

// refreshOwner sets an address's owner from its set, else its per-address
// record, and adds it to the batch when it changes.
func (t *tenantState) refreshOwner(addr netip.Addr) {
	node, ok := "", false
	if k, in := t.inSet[addr]; in {
		node, ok = k.node, true
	} else if e, in := t.legacy[addr]; in {
		node, ok = e.node, true
	}
	cur, had := t.owners[addr]
	if cur == node && had == ok {
		return
	}
	if t.batch.owners == nil {
		t.batch.owners = map[netip.Addr]string{}
	}
	if _, in := t.batch.owners[addr]; !in {
		t.batch.owners[addr] = cur
	}
	if ok {
		t.owners[addr] = node
	} else {
		delete(t.owners, addr)
	}
}

// ownerWrite is one address's new owner ("": none), decided where the
// address's recorded owner was was ("": none).
type ownerWrite struct {
	addr      netip.Addr
	node, was string
}

// written is what this replica committed that its state may not show yet:
// owner sets (addrs nil and rev set: deleted) and deleted per-address
// records, each with the revision it was committed at.
type written struct {
	sets   map[setKey]ownerSet
	legacy map[netip.Addr]int64
}

// ownerCommit is the changes that record a batch of owners: sets, each
// conditional on the set it replaces (one change per shard), then the
// per-address records they supersede (deleted once the sets are written,
// so that an address never lacks an owner meanwhile).
type ownerCommit struct {
	sets   []setChange
	legacy []ownerEntryAt
}

// setChange is one shard's change, and the sets it writes.
type setChange struct {
	change ipam.Change
	wrote  map[setKey][]netip.Addr // nil slice: deleted
}

// ownerEntryAt is a per-address record to delete.
type ownerEntryAt struct {
	addr netip.Addr
	rev  int64
}

// ownerChanges returns the changes that record the owners in writes,
// against the tenant's recorded sets as this replica last wrote or saw
// them (w), and with every per-address record of an address written, or
// migrate, of every address, rewritten into a set. Cost: the writes, plus
// the sets of the shards they touch.
func (s *State) ownerChanges(tenant string, writes []ownerWrite, w *written, migrate bool) ownerCommit {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenant(tenant)
	w.prune(s.rev)
	if migrate {
		for addr, e := range t.legacy {
			if _, ok := t.inSet[addr]; !ok && w.legacy[addr] == 0 {
				writes = append(writes, ownerWrite{addr, e.node, e.node})
			}
		}
	}
	byShard := map[int][]ownerWrite{}
	for _, wr := range writes {
		sh := shardOf(wr.addr)
		byShard[sh] = append(byShard[sh], wr)
	}
	// The owner an address's per-address record gives, unless this
	// replica deleted it ("": none).
	legacy := func(a netip.Addr) string {
		if e, ok := t.legacy[a]; ok && w.legacy[a] == 0 {
			return e.node
		}
		return ""
	}
	var out ownerCommit
	for sh, ws := range byShard {
		// The shard's sets as this replica knows them, and who holds
		// each of their addresses.
		view := map[setKey]ownerSet{}
		for k, set := range t.sets {
			if k.shard == sh {
				view[k] = set
			}
		}
		for k, set := range w.sets {
			if k.shard == sh && set.rev > view[k].rev {
				if len(set.addrs) == 0 {
					delete(view, k) // deleted: written again from none
				} else {
					view[k] = set
				}
			}
		}
		drafts, moved, kept := shardDrafts(view, ws, legacy, true)
		if moved && len(drafts) > maxSetOps {
			// Too many sets for one transaction, and moves among them
			// (an address leaving one set for another must leave and
			// arrive at once): give the addresses up first, alone (a
			// change that only removes may be split); their new owners are
			// recorded in the next round, once the watch shows this one.
			drafts, _, kept = shardDrafts(view, ws, legacy, false)
			// The addresses given a new owner keep their old records
			// until it is recorded.
			kept = slices.DeleteFunc(kept, func(wr ownerWrite) bool { return wr.node != "" })
		}
		var sc setChange
		for k, d := range drafts {
			rev := view[k].rev
			if len(d) == 0 && rev == 0 {
				continue
			}
			addrs := slices.SortedFunc(maps.Keys(d), netip.Addr.Compare)
			if slices.Equal(addrs, view[k].addrs) {
				continue
			}
			if len(sc.change.Conds) == maxSetOps {
				out.sets = append(out.sets, sc)
				sc = setChange{}
			}
			if sc.wrote == nil {
				sc.wrote = map[setKey][]netip.Addr{}
			}
			ref := ipam.Ref{Kind: ipam.KindL2OwnerSet, ID: ipam.L2OwnerSetID(tenant, k.node, k.shard)}
			sc.change.Conds = append(sc.change.Conds, ipam.Cond{Ref: ref, Rev: rev})
			if len(addrs) == 0 {
				sc.change.Deletes = append(sc.change.Deletes, ref)
			} else {
				sc.change.Puts = append(sc.change.Puts, ipam.Put{Ref: ref, Value: &ipam.L2OwnerSet{Node: k.node, Shard: k.shard, Addrs: addrs}})
			}
			sc.wrote[k] = addrs
		}
		if len(sc.wrote) > 0 {
			out.sets = append(out.sets, sc)
		}
		for _, wr := range kept {
			if e, ok := t.legacy[wr.addr]; ok && w.legacy[wr.addr] == 0 {
				out.legacy = append(out.legacy, ownerEntryAt{wr.addr, e.rev})
			}
		}
	}
	return out
}

// maxSetOps is the most sets one change writes: each is a condition and a
// write, and the change also compares the fence (see Hub.LeadOwners), so
// two such changes fit one etcd transaction at its default --max-txn-ops
// of 128 (the store merges queued changes into transactions).
const maxSetOps = 63

// shardDrafts returns the new contents of the sets of one shard that
// writes change, from view (the shard's sets; legacy gives the owner of an
// address in none, "" for none), and whether an address moves from one set
// to another, and the writes it kept (the per-address records of their
// addresses are superseded). add false leaves the additions out.
//
// A write decided where the address's owner was another than view shows
// is left out: it was decided on an older view than the one its sets'
// conditions are taken from (a full plan's input, or the state before the
// watch showed what this replica committed), so the conditions could not
// catch it, and it could move an address its decision never saw owned (a
// node joining just after an address was first recorded would take it).
// The newer owner reaches the state through the watch, and the plan made
// then decides again.
func shardDrafts(view map[setKey]ownerSet, ws []ownerWrite, legacy func(netip.Addr) string, add bool) (drafts map[setKey]map[netip.Addr]bool, moved bool, kept []ownerWrite) {
	holder := map[netip.Addr]setKey{}
	for k, set := range view {
		for _, a := range set.addrs {
			holder[a] = k
		}
	}
	drafts = map[setKey]map[netip.Addr]bool{}
	draft := func(k setKey) map[netip.Addr]bool {
		d := drafts[k]
		if d == nil {
			d = make(map[netip.Addr]bool, len(view[k].addrs)+1)
			for _, a := range view[k].addrs {
				d[a] = true
			}
			drafts[k] = d
		}
		return d
	}
	for _, wr := range ws {
		old, held := holder[wr.addr]
		cur := old.node
		if !held {
			cur = legacy(wr.addr)
		}
		if cur != wr.was {
			continue // decided on an older view
		}
		kept = append(kept, wr)
		if held && old.node == wr.node || !held && wr.node == "" {
			continue
		}
		if held {
			delete(draft(old), wr.addr)
			delete(holder, wr.addr)
		}
		if wr.node == "" {
			continue
		}
		moved = moved || held
		if add {
			k := setKey{wr.node, shardOf(wr.addr)}
			draft(k)[wr.addr] = true
			holder[wr.addr] = k
		}
	}
	return drafts, moved, kept
}

// prune forgets what the state shows now that it has applied rev.
func (w *written) prune(rev int64) {
	for k, set := range w.sets {
		if set.rev <= rev {
			delete(w.sets, k)
		}
	}
	for a, r := range w.legacy {
		if r <= rev {
			delete(w.legacy, a)
		}
	}
}
