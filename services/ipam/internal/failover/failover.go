// Package failover measures how long writes stop when the etcd leader
// dies: it kills the leader of a cluster under a steady write load, again
// and again, and times from each kill to the first write that commits
// after it. The robustness tests and ipam-bench run it, against etcd
// members in the test's process or against real etcd processes.
package failover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Cluster is an etcd cluster whose leader can be killed and brought back.
type Cluster interface {
	// KillLeader kills the member that leads, as a crash would (no
	// leadership handover), and returns which member it was and when it
	// was killed (just before the kill: finding the leader may take a
	// while, and writes commit meanwhile).
	KillLeader(ctx context.Context) (int, time.Time, error)
	// Restart brings member i back with its data and waits until it
	// serves.
	Restart(ctx context.Context, i int) error
}

// Write makes one write through the IPAM (worker's seq-th); nil means it
// committed.
type Write func(ctx context.Context, worker, seq int) error

// Config says how to measure.
type Config struct {
	// Kills is how many times the leader is killed (default 5).
	Kills int
	// Writers is how many callers write at once (default 4).
	Writers int
	// WriteTimeout bounds one write, as a client's deadline would; a
	// write that fails is retried at once, as clients do (default 30 s).
	WriteTimeout time.Duration
	// GapLimit is how long to wait for a write after a kill before giving
	// up on the run (default 60 s).
	GapLimit time.Duration
	// Logger receives one line per kill (default: none).
	Logger *slog.Logger
}

// ErrNoWrite is returned when no write commits within GapLimit of a kill.
var ErrNoWrite = errors.New("failover: no write committed after the leader was killed")

// Gap is what one kill cost.
type Gap struct {
	// Member is the member killed.
	Member int
	// Gap is from the kill to the end of the first write started after
	// it that committed.
	Gap time.Duration
	// Failed counts the writes that failed between the kill and that one.
	Failed int
}

// done is one finished write.
type done struct {
	start, end time.Time
	err        error
}

// Measure runs the writers and kills the leader cfg.Kills times, each time
// once writes flow again after the member killed before is back; it
// returns one Gap per kill.
func Measure(ctx context.Context, c Cluster, write Write, cfg Config) ([]Gap, error) {
	if cfg.Kills <= 0 {
		cfg.Kills = 5
	}
	if cfg.Writers <= 0 {
		cfg.Writers = 4
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.GapLimit <= 0 {
		cfg.GapLimit = 60 * time.Second
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var mu sync.Mutex
	var log []done
	wake := make(chan struct{}, 1)
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range cfg.Writers {
		wg.Go(func() {
			for seq := 0; wctx.Err() == nil; seq++ {
				start := time.Now()
				cctx, cancel := context.WithTimeout(wctx, cfg.WriteTimeout)
				err := write(cctx, w, seq)
				cancel()
				if wctx.Err() != nil {
					return
				}
				mu.Lock()
				log = append(log, done{start: start, end: time.Now(), err: err})
				mu.Unlock()
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		})
	}
	defer func() { stop(); wg.Wait() }()

	// firstAfter waits for the first write started at or after t that
	// committed.
	firstAfter := func(t time.Time) (done, int, error) {
		limit := time.NewTimer(cfg.GapLimit)
		defer limit.Stop()
		for {
			mu.Lock()
			failed := 0
			for _, d := range log {
				if d.start.Before(t) {
					continue
				}
				if d.err == nil {
					mu.Unlock()
					return d, failed, nil
				}
				failed++
			}
			mu.Unlock()
			select {
			case <-wake:
			case <-limit.C:
				return done{}, 0, fmt.Errorf("%w within %v", ErrNoWrite, cfg.GapLimit)
			case <-ctx.Done():
				return done{}, 0, ctx.Err()
			}
		}
	}
	var gaps []Gap
	for k := range cfg.Kills {
		if _, _, err := firstAfter(time.Now()); err != nil {
			return gaps, fmt.Errorf("failover: writes before kill %d: %w", k, err)
		}
		mu.Lock()
		log = log[:0]
		mu.Unlock()
		member, killed, err := c.KillLeader(ctx)
		if err != nil {
			return gaps, fmt.Errorf("failover: kill %d: %w", k, err)
		}
		d, failed, err := firstAfter(killed)
		if err != nil {
			return gaps, fmt.Errorf("failover: kill %d: %w", k, err)
		}
		g := Gap{Member: member, Gap: d.end.Sub(killed), Failed: failed}
		gaps = append(gaps, g)
		logger.InfoContext(ctx, "leader killed", "kill", k, "member", member, "gap", g.Gap, "failed_writes", failed)
		if err := c.Restart(ctx, member); err != nil {
			return gaps, fmt.Errorf("failover: restart member %d: %w", member, err)
		}
	}
	return gaps, nil
}

// Quantile returns the q-quantile (0 < q <= 1, nearest rank) of the gaps.
func Quantile(gaps []Gap, q float64) time.Duration {
	if len(gaps) == 0 {
		return 0
	}
	ds := make([]time.Duration, len(gaps))
	for i, g := range gaps {
		ds[i] = g.Gap
	}
	slices.Sort(ds)
	i := int(q*float64(len(ds))+0.999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}
