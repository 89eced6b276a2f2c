package store

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// unreadable holds the objects a watch skipped because it could not decode
// them (they are rare: a value written by something else than a replica),
// until a later change of the same key is read or deletes it. Readers of
// the index ask it, so that a listing from the index fails as a listing
// from etcd did, instead of leaving such an object out unsaid.
type unreadable struct {
	n    atomic.Int64 // len(refs): the watch's fast path takes no lock
	mu   sync.Mutex
	refs map[ipam.Ref]struct{}
}

// mark records that ref's latest value could not be decoded.
func (u *unreadable) mark(ref ipam.Ref) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.refs == nil {
		u.refs = make(map[ipam.Ref]struct{})
	}
	u.refs[ref] = struct{}{}
	u.n.Store(int64(len(u.refs)))
}

// forget records that ref's latest change was read.
func (u *unreadable) forget(ref ipam.Ref) {
	if u.n.Load() == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.refs, ref)
	u.n.Store(int64(len(u.refs)))
}

// Unreadable reports whether a watch of this store skipped the latest
// value of an object of the kind whose ID starts with idPrefix because it
// could not decode it (and logged it). The watch updates it before it
// passes on the revision of the change, so it is current for a reader
// that waited for the index to reach a revision.
func (s *Store) Unreadable(kind ipam.Kind, idPrefix string) bool {
	u := &s.unreadable
	if u.n.Load() == 0 {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for r := range u.refs {
		if r.Kind == kind && strings.HasPrefix(r.ID, idPrefix) {
			return true
		}
	}
	return false
}
