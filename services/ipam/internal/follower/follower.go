// Package follower keeps a replica's index in step with etcd: it loads the
// whole state once, then applies the watch, and loads again if the watch
// fell behind etcd's compaction.
package follower

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/index"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Source is where state comes from.
type Source interface {
	LoadState(ctx context.Context) ([]ipam.Event, int64, error)
	WatchState(ctx context.Context, after int64, known func(ipam.Ref, int64) bool, fn func(events []ipam.Event, rev int64)) error
}

// Follower feeds an index from a source.
type Follower struct {
	src    Source
	idx    *index.Index
	logger *slog.Logger
	loaded atomic.Bool
}

// New returns a Follower.
func New(src Source, idx *index.Index, logger *slog.Logger) *Follower {
	return &Follower{src: src, idx: idx, logger: logger}
}

// Ready reports whether the index has loaded the state at least once.
func (f *Follower) Ready(context.Context) error {
	if !f.loaded.Load() {
		return errors.New("index not loaded yet")
	}
	return nil
}

// Load loads the state into the index once; Run calls it too, but callers
// that must not serve before the index is loaded call it first.
func (f *Follower) Load(ctx context.Context) (int64, error) {
	events, rev, err := f.src.LoadState(ctx)
	if err != nil {
		return 0, err
	}
	f.idx.Replace(events, rev)
	f.loaded.Store(true)
	f.logger.InfoContext(ctx, "index loaded", "objects", len(events), "revision", rev)
	return rev, nil
}

// Run follows the watch from revision after until ctx is done, reloading
// when the watch cannot resume and retrying with backoff on errors.
func (f *Follower) Run(ctx context.Context, after int64) error {
	backoff := 100 * time.Millisecond
	for {
		err := f.src.WatchState(ctx, after, f.idx.Known, func(events []ipam.Event, rev int64) {
			f.idx.Apply(events, rev)
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
