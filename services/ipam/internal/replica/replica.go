// Package replica assembles one IPAM replica over an etcd client: the store,
// the in-memory index and the follower that feeds it (follow.go), the allocator, and the
// gRPC services. ipamd runs one; tests run several on one etcd.
package replica

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"math/big"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/beaconlb/beacon/services/ipam/internal/allocator"
	"github.com/beaconlb/beacon/services/ipam/internal/announce"
	"github.com/beaconlb/beacon/services/ipam/internal/index"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/server"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
	"github.com/beaconlb/beacon/services/ipam/internal/subscription"
)

// Options tunes a replica.
type Options struct {
	// ReleaseHold is how long released addresses are kept for their owner
	// by default.
	ReleaseHold time.Duration
	// CommitWorkers is how many etcd transactions may be in flight.
	CommitWorkers int
	// EtcdCallTimeout bounds each etcd call (see store.Options.CallTimeout).
	EtcdCallTimeout time.Duration
	// ListRound and ListScanMax bound what a page of ListAllocations
	// examines (see server.Deps; 0: the defaults).
	ListRound, ListScanMax int
	// AuditRetention is how long audit records are kept (see
	// store.Options.AuditTTL).
	AuditRetention time.Duration
	// Now returns the time (default time.Now).
	Now func() time.Time
	// Meter records metrics (default: none).
	Meter metric.Meter
	// Heartbeat is how often announcers must send heartbeats.
	Heartbeat time.Duration
}

// ownerWorkers is how many transactions of L2 owner records may be in
// flight at once; the hub queues more chunks than that, which the store
// merges into transactions as large as etcd allows.
const ownerWorkers = 8

// granter adapts the store's leases to the announcer sessions' interface.
type granter struct{ st *store.Store }

func (g granter) GrantLease(ctx context.Context, ttl time.Duration) (subscription.KeptLease, error) {
	l, err := g.st.GrantLease(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return keptLease{l}, nil
}

// keptLease is a store lease whose ties are subscription.Registrations.
type keptLease struct{ *store.Lease }

func (l keptLease) Tie(r ipam.Ref) subscription.Registration { return l.Lease.Tie(r) }

// Replica is one IPAM replica.
type Replica struct {
	store     *store.Store
	owners    *store.Store
	index     *index.Index
	announced *announce.State
	hub       *announce.Hub
	lease     *subscription.ReplicaLease
	follower  *Follower
	alloc     *allocator.Allocator
	server    *server.Server
	id        string
	rev       int64
}

// New assembles a replica. Call Load, then Run, then register it on a gRPC
// server.
func New(client *store.Client, logger *slog.Logger, opts Options) *Replica {
	st := store.New(client, logger, store.Options{Workers: opts.CommitWorkers, CallTimeout: opts.EtcdCallTimeout, AuditTTL: opts.AuditRetention})
	idx := index.New()
	alloc := allocator.New(idx, st, logger, allocator.Options{DefaultHold: opts.ReleaseHold, Now: opts.Now, Meter: opts.Meter})
	if opts.Meter != nil {
		observePools(opts.Meter, idx, logger)
	}
	fs := announce.NewState()
	// The L2 owner records the elected replica writes when a node dies
	// go through a store of their own with several transactions in
	// flight (see announce.Hub.recordOwners): the many owner records of one
	// node are committed together, not behind one another, and the
	// allocation commits keep their own pure group commit.
	owners := store.New(client, logger, store.Options{Workers: ownerWorkers, CallTimeout: opts.EtcdCallTimeout})
	hub := announce.NewHub(fs, owners, logger)
	// The watch may skip decoding only what the index holds and the announcement state
	// view does not need: claims, holds and guards.
	known := func(r ipam.Ref, rev int64) bool {
		return (r.Kind == ipam.KindClaim || r.Kind == ipam.KindHold || r.Kind == ipam.KindShare || r.Kind == ipam.KindTenantGuard) && idx.Known(r, rev)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	lease := subscription.NewReplicaLease(granter{st}, logger)
	return &Replica{
		lease:     lease,
		store:     st,
		owners:    owners,
		index:     idx,
		announced: fs,
		hub:       hub,
		follower:  newFollower(st, logger, known, idx, fs),
		alloc:     alloc,
		server: server.New(server.Deps{
			Writer: alloc, Reader: st, Usage: idx, Creations: alloc, Lister: alloc, Hub: hub, Leases: lease, Announced: fs, Heartbeat: opts.Heartbeat,
			ListRound: opts.ListRound, ListScanMax: opts.ListScanMax,
		}, logger),
		id: hex.EncodeToString(id[:]),
	}
}

// Load loads the state from etcd into the index.
func (r *Replica) Load(ctx context.Context) error {
	key, err := r.store.SharedSecret(ctx, "page-token-key", 32)
	if err != nil {
		return err
	}
	r.server.SetPageKey(key)
	rev, err := r.follower.Load(ctx)
	r.rev = rev
	return err
}

// Register registers the replica's gRPC services.
func (r *Replica) Register(g grpc.ServiceRegistrar) { r.server.Register(g) }

// PoolTenants returns the tenants list of pool id (access.Pools).
func (r *Replica) PoolTenants(ctx context.Context, id string) ([]string, bool, error) {
	res, err := r.alloc.GetPool(ctx, id)
	if errors.Is(err, ipam.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return res.Pool.Tenants, true, nil
}

// StopStreams ends the long-lived streams; see server.Server.StopStreams.
func (r *Replica) StopStreams() { r.server.StopStreams() }

// Run commits, follows etcd and expires allocations until ctx is done.
func (r *Replica) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return r.store.Run(ctx) })
	g.Go(func() error { return r.owners.Run(ctx) })
	g.Go(func() error { return r.follower.Run(ctx, r.rev) })
	g.Go(func() error { return r.alloc.RunExpiry(ctx) })
	g.Go(func() error { return r.hub.Run(ctx) })
	g.Go(func() error { return r.lease.Run(ctx) })
	g.Go(func() error { return r.store.Campaign(ctx, "l2owners", r.id, r.hub.LeadOwners) })
	return g.Wait()
}

// StorageReady is a readiness check: etcd answers.
func (r *Replica) StorageReady(ctx context.Context) error { return r.store.Ready(ctx) }

// IndexReady is a readiness check: the index has loaded.
func (r *Replica) IndexReady(ctx context.Context) error { return r.follower.Ready(ctx) }

// observePools exports every pool's usage as gauges, read from the index at
// each collection.
func observePools(m metric.Meter, idx *index.Index, logger *slog.Logger) {
	used, err1 := m.Int64ObservableGauge("beacon.ipam.pool.used", metric.WithDescription("Addresses in use (held ones included) per pool and family"))
	size, err2 := m.Float64ObservableGauge("beacon.ipam.pool.size", metric.WithDescription("Addresses a pool can hand out per family (float: a /64 exceeds int64)"))
	if err := errors.Join(err1, err2); err != nil {
		logger.Warn("pool metrics unavailable", "error", err)
		return
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, name := range idx.PoolNames() {
			for _, u := range idx.Usage(name) {
				attrs := metric.WithAttributes(attribute.String("pool", name), attribute.String("family", u.Family.String()))
				o.ObserveInt64(used, int64(u.Used), attrs)
				f, _ := new(big.Float).SetInt(u.Size).Float64()
				o.ObserveFloat64(size, f, attrs)
			}
		}
		return nil
	}, used, size)
	if err != nil {
		logger.Warn("pool metrics unavailable", "error", err)
	}
}
