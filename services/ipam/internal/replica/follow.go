package replica

// The follower keeps a replica's in-memory views (the index and the announcement
// state) in step with etcd: it loads the whole state once, then applies the
// watch, and loads again if the watch fell behind etcd's compaction.

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Source is where state comes from.
type Source interface {
	LoadState(ctx context.Context) ([]ipam.Event, int64, error)
	WatchState(ctx context.Context, after int64, known func(ipam.Ref, int64) bool, fn func(events []ipam.Event, rev int64)) error
}

// Sink is an in-memory view fed by the follower.
type Sink interface {
	// Replace swaps the view's whole state for events loaded at rev.
	Replace(events []ipam.Event, rev int64)
	// Apply records events; rev is the watch's progress.
	Apply(events []ipam.Event, rev int64)
}

// Follower feeds views from a source.
type Follower struct {
	src    Source
	sinks  []Sink
	known  func(ipam.Ref, int64) bool
	logger *slog.Logger
	loaded atomic.Bool
}

// newFollower returns a Follower feeding sinks. known, if set, reports objects every
// sink already holds at a revision (the replica's own commits), which the
// watch then need not decode.
func newFollower(src Source, logger *slog.Logger, known func(ipam.Ref, int64) bool, sinks ...Sink) *Follower {
	return &Follower{src: src, sinks: sinks, known: known, logger: logger}
}

// Ready reports whether the views have loaded the state at least once.
func (f *Follower) Ready(context.Context) error {
	if !f.loaded.Load() {
		return errors.New("state not loaded yet")
	}
	return nil
}

// Load loads the state into every view; callers that must not serve before
// it is loaded call it before Run.
func (f *Follower) Load(ctx context.Context) (int64, error) {
	events, rev, err := f.src.LoadState(ctx)
	if err != nil {
		return 0, err
	}
	for _, s := range f.sinks {
		s.Replace(events, rev)
	}
	f.loaded.Store(true)
	f.logger.InfoContext(ctx, "state loaded", "objects", len(events), "revision", rev)
	return rev, nil
}

// Run follows the watch from revision after until ctx is done, reloading
// when the watch cannot resume and retrying with backoff on errors.
func (f *Follower) Run(ctx context.Context, after int64) error {
	backoff := 100 * time.Millisecond
	for {
		err := f.src.WatchState(ctx, after, f.known, func(events []ipam.Event, rev int64) {
			for _, s := range f.sinks {
				s.Apply(events, rev)
			}
			after = rev
			backoff = 100 * time.Millisecond
		})
		select {
		case <-ctx.Done():
			return nil
		default:
		}
		if errors.Is(err, ipam.ErrResumeTooOld) {
			f.logger.WarnContext(ctx, "watch fell behind compaction; reloading", "error", err)
			rev, lerr := f.Load(ctx)
			if lerr == nil {
				after = rev
				continue
			}
			err = lerr
		}
		f.logger.WarnContext(ctx, "watch interrupted; retrying", "error", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}
