package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// LoadState reads every state object (pools, allocations, claims, holds,
// the announcement config) at one revision, in chunks (see scan), decoding
// the chunks on every core while etcd reads the next ones.
func (s *Store) LoadState(ctx context.Context) ([]ipam.Event, int64, error) {
	type chunk struct {
		kvs []*mvccpb.KeyValue
		out *[]ipam.Event
	}
	var (
		decoded []*[]ipam.Event // in key order
		errMu   sync.Mutex
		decErr  error
		wg      sync.WaitGroup
	)
	work := make(chan chunk, 2*runtime.GOMAXPROCS(0))
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			in := newInterner()
			for c := range work {
				evs := make([]ipam.Event, 0, len(c.kvs))
				for _, kv := range c.kvs {
					ev, ok, err := eventOf(kv, false)
					if err != nil {
						errMu.Lock()
						decErr = cmp.Or(decErr, err)
						errMu.Unlock()
						break
					}
					if ok {
						in.value(ev.Value)
						evs = append(evs, ev)
					}
				}
				*c.out = evs
			}
		})
	}
	rev, err := s.conn.scan(ctx, statePrefix, clientv3.GetPrefixRangeEnd(statePrefix), 0, 0, func(kvs []*mvccpb.KeyValue) error {
		out := new([]ipam.Event)
		decoded = append(decoded, out)
		select {
		case work <- chunk{kvs, out}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(work)
	wg.Wait()
	if err != nil {
		return nil, 0, fmt.Errorf("store: load state: %w: %w", ipam.ErrUnavailable, err)
	}
	if decErr != nil {
		return nil, 0, decErr
	}
	n := 0
	for _, d := range decoded {
		n += len(*d)
	}
	out := make([]ipam.Event, 0, n)
	for _, d := range decoded {
		out = append(out, *d...)
	}
	return out, rev, nil
}

// WatchState calls fn with every change to state objects after revision
// after, in commit order, and with the watch's progress (fn's rev is the
// revision the caller has now seen everything up to: the last event's, or
// a progress notification's, never beyond an event not yet delivered). It returns
// ipam.ErrResumeTooOld when after is too old, or ctx's error.
//
// known, if set, reports objects the caller already holds at that revision
// (its own commits): they are passed on without their value, unparsed.
func (s *Store) WatchState(ctx context.Context, after int64, known func(ipam.Ref, int64) bool, fn func(events []ipam.Event, rev int64)) error {
	return s.watch(stateStream(ctx), statePrefix, after, false, known, fn)
}

// stateStream marks ctx so that the state watch has an etcd watch stream
// of its own, which RequestProgress asks. etcd answers a progress request
// only when every watch of the stream is in sync and none starts after the
// current revision: a watch of another kind opened at the next revision
// (as the fleet's are, right after they read) would hold the state
// watch's progress back until the next write anywhere, and a listing
// waiting for the index to reach the last revision (an election's key, a
// lease's) would wait for it. The metadata replaces any the caller's ctx
// carries, so that the two always name the same stream.
func stateStream(ctx context.Context) context.Context {
	return metadata.NewOutgoingContext(ctx, metadata.Pairs("beacon-watch", "state"))
}

// WatchKind is WatchState for one kind, under an ID prefix, with deleted
// objects carrying their last value.
func (s *Store) WatchKind(ctx context.Context, kind ipam.Kind, idPrefix string, after int64, fn func(events []ipam.Event, rev int64)) error {
	return s.watch(ctx, kindPrefix(kind)+idPrefix, after, true, nil, fn)
}

func (s *Store) watch(ctx context.Context, prefix string, after int64, prev bool, known func(ipam.Ref, int64) bool, fn func([]ipam.Event, int64)) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(after + 1), clientv3.WithProgressNotify()}
	if prev {
		opts = append(opts, clientv3.WithPrevKV())
	}
	wch := s.client.Watch(ctx, prefix, opts...)
	for {
		// The client closes the channel when ctx is done, except while it
		// is reconnecting to an etcd that does not answer: then only
		// ctx.Done tells the watch to end.
		var resp clientv3.WatchResponse
		var open bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case resp, open = <-wch:
		}
		if !open {
			break
		}
		if err := resp.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) || resp.CompactRevision > 0 {
				return fmt.Errorf("store: %w: resume from %d, compacted at %d", ipam.ErrResumeTooOld, after, resp.CompactRevision)
			}
			return fmt.Errorf("store: watch %s: %w: %w", prefix, ipam.ErrUnavailable, err)
		}
		events := make([]ipam.Event, 0, len(resp.Events))
		for _, e := range resp.Events {
			kv := e.Kv
			deleted := e.Type == mvccpb.DELETE
			// The state watch passes on what this store committed as it
			// was committed, rather than decode it again.
			var mine any
			if !prev {
				mine = s.recall(string(kv.Key), kv.ModRevision)
			}
			if !deleted && (known != nil || mine != nil) {
				if ref, ok := parseKey(string(kv.Key)); ok {
					if known != nil && known(ref, kv.ModRevision) {
						continue
					}
					if mine != nil {
						s.unreadable.forget(ref)
						events = append(events, ipam.Event{Ref: ref, Value: mine, Rev: kv.ModRevision})
						continue
					}
				}
			}
			if deleted && prev && e.PrevKv != nil {
				kv = &mvccpb.KeyValue{Key: e.Kv.Key, Value: e.PrevKv.Value, ModRevision: e.Kv.ModRevision}
			}
			ev, ok, err := eventOf(kv, deleted && !prev)
			if err != nil {
				s.logger.WarnContext(ctx, "skipping undecodable object", "key", string(e.Kv.Key), "error", err)
				if ref, ok := parseKey(string(e.Kv.Key)); ok {
					if deleted {
						s.unreadable.forget(ref) // gone: its old value did not decode
					} else {
						s.unreadable.mark(ref)
					}
				}
				continue
			}
			if ok {
				s.unreadable.forget(ev.Ref)
				if deleted && prev {
					ev.Deleted = true
				}
				events = append(events, ev)
			}
		}
		// Progress is the last event's revision, not the header's: while a
		// watch catches up, etcd sends events in batches of at most 1,000
		// revisions, each with its current revision in the header, and a
		// caller resuming from that would skip the batches not yet sent.
		// Only a progress notification (sent to a watch that has caught
		// up) vouches for the header's revision.
		switch {
		case len(resp.Events) > 0:
			after = resp.Events[len(resp.Events)-1].Kv.ModRevision
		case resp.IsProgressNotify():
			after = max(after, resp.Header.Revision)
		default:
			continue
		}
		fn(events, after)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("store: watch %s closed", prefix)
}

// eventOf decodes one key-value; deleted events carry no value.
func eventOf(kv *mvccpb.KeyValue, deleted bool) (ipam.Event, bool, error) {
	ref, ok := parseKey(string(kv.Key))
	if !ok {
		return ipam.Event{}, false, nil
	}
	// The ID is a part of the key: a copy of its own lets the key go (the
	// index keeps IDs as long as their objects, and the prefix is most of
	// the key).
	ref.ID = strings.Clone(ref.ID)
	ev := ipam.Event{Ref: ref, Rev: kv.ModRevision}
	if deleted {
		return ev, true, nil
	}
	v, err := decode(ref.Kind, kv.Value)
	if err != nil {
		return ipam.Event{}, false, err
	}
	ev.Value = v
	return ev, true, nil
}
