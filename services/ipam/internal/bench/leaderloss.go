package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/failover"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// UnitMillis is milliseconds.
const UnitMillis = "ms"

// LeaderLossConfig configures LeaderLoss.
type LeaderLossConfig struct {
	// Binary is the etcd executable; the cluster has 3 members.
	Binary string
	// Kills is how many times the leader is killed (default 30).
	Kills int
	// Writers is how many callers allocate at once (default 8).
	Writers int
	// EtcdTimeout is the replica's etcd call timeout, as ipamd's
	// --etcd-timeout (default 5 s, its default).
	EtcdTimeout time.Duration
	// Log receives progress and the replica's warnings (default
	// io.Discard).
	Log io.Writer
}

// LeaderLoss measures how long writes stop when the etcd leader dies: a
// 3-member cluster of real etcd processes, one replica dialed to every
// member, Writers callers allocating through it, and the leader killed
// with SIGKILL Kills times (the member is started again after each, once
// writes flow). A gap is from the kill to the end of the first allocation
// started after it that committed. It returns the gap's median, p99 and
// maximum, and how many kills it took.
func LeaderLoss(ctx context.Context, cfg LeaderLossConfig) (figs []Figure, err error) {
	if cfg.Kills <= 0 {
		cfg.Kills = 30
	}
	if cfg.Writers <= 0 {
		cfg.Writers = 8
	}
	if cfg.EtcdTimeout <= 0 {
		cfg.EtcdTimeout = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	dir, err := os.MkdirTemp("", "ipam-bench-leaderloss-")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	cluster, err := startProcCluster(ctx, cfg.Binary, 3, dir)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cluster.stop()) }()
	client, err := store.Dial(ctx, store.DialConfig{Endpoints: cluster.endpoints})
	if err != nil {
		return nil, err
	}
	defer func() { _ = client.Close() }()
	logger := slog.New(slog.NewTextHandler(cfg.Log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	node, err := startBeacon(ctx, client, logger, replica.Options{EtcdCallTimeout: cfg.EtcdTimeout})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, node.stop()) }()
	fmt.Fprintf(cfg.Log, "== etcd leader loss: 3 etcd processes of %s (data in %s), %d writers, %d kills\n", cfg.Binary, dir, cfg.Writers, cfg.Kills)
	gaps, err := failover.Measure(ctx, cluster, failover.Write(node.allocOp("leaderloss")), failover.Config{
		Kills: cfg.Kills, Writers: cfg.Writers, WriteTimeout: 2 * cfg.EtcdTimeout, GapLimit: 60 * time.Second,
		Logger: slog.New(slog.NewTextHandler(cfg.Log, nil)),
	})
	if err != nil {
		return nil, err
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return []Figure{
		{Name: "etcd_leader_loss_write_gap_p50", Value: ms(failover.Quantile(gaps, 0.5)), Unit: UnitMillis},
		{Name: "etcd_leader_loss_write_gap_p99", Value: ms(failover.Quantile(gaps, 0.99)), Unit: UnitMillis},
		{Name: "etcd_leader_loss_write_gap_max", Value: ms(failover.Quantile(gaps, 1)), Unit: UnitMillis},
		{Name: "etcd_leader_loss_kills", Value: float64(len(gaps)), Unit: "kills"},
	}, nil
}
