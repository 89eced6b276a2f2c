// Package replica assembles one IPAM replica over an etcd client: the store,
// the in-memory index and the follower that feeds it, the allocator, and the
// gRPC services. ipamd runs one; tests run several on one etcd.
package replica

import (
	"context"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/beaconlb/beacon/services/ipam/internal/allocator"
	"github.com/beaconlb/beacon/services/ipam/internal/follower"
	"github.com/beaconlb/beacon/services/ipam/internal/index"
	"github.com/beaconlb/beacon/services/ipam/internal/server"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// Options tunes a replica.
type Options struct {
	// ReleaseHold is how long released addresses are kept for their owner
	// by default.
	ReleaseHold time.Duration
	// CommitWorkers is how many etcd transactions may be in flight.
	CommitWorkers int
	// Now returns the time (default time.Now).
	Now func() time.Time
}

// Replica is one IPAM replica.
type Replica struct {
	store    *store.Store
	index    *index.Index
	follower *follower.Follower
	alloc    *allocator.Allocator
	server   *server.Server
	rev      int64
}

// New assembles a replica. Call Load, then Run, then register it on a gRPC
// server.
func New(client *store.Client, logger *slog.Logger, opts Options) *Replica {
	st := store.New(client, logger, store.Options{Workers: opts.CommitWorkers})
	idx := index.New()
	alloc := allocator.New(idx, st, logger, allocator.Options{DefaultHold: opts.ReleaseHold, Now: opts.Now})
	return &Replica{
		store:    st,
		index:    idx,
		follower: follower.New(st, idx, logger),
		alloc:    alloc,
		server:   server.New(alloc, st, idx, logger),
	}
}

// Load loads the state from etcd into the index.
func (r *Replica) Load(ctx context.Context) error {
	rev, err := r.follower.Load(ctx)
	r.rev = rev
	return err
}

// Register registers the replica's gRPC services.
func (r *Replica) Register(g grpc.ServiceRegistrar) { r.server.Register(g) }

// Run commits, follows etcd and expires allocations until ctx is done.
func (r *Replica) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return r.store.Run(ctx) })
	g.Go(func() error { return r.follower.Run(ctx, r.rev) })
	g.Go(func() error { return r.alloc.RunExpiry(ctx) })
	return g.Wait()
}

// StorageReady is a readiness check: etcd answers.
func (r *Replica) StorageReady(ctx context.Context) error { return r.store.Ready(ctx) }

// IndexReady is a readiness check: the index has loaded.
func (r *Replica) IndexReady(ctx context.Context) error { return r.follower.Ready(ctx) }
