package robustness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Config says how to run.
type Config struct {
	Seed     uint64
	Duration time.Duration // of the load
	Clients  int
	Replicas int
	Members  int
	// Faults turns fault injection on; Cut allows cutting replicas from
	// etcd (needs root and iptables).
	Faults, Cut bool
	Etcd, IPAMD string // binaries
	Dir         string // logs, data, and a failing run's history
	// NoRequestIDs makes the clients send no request_id (for an allocator
	// without them).
	NoRequestIDs bool
	// CheckTimeout bounds the linearizability check (0: none).
	CheckTimeout time.Duration
	Logf         func(format string, args ...any)
}

// Report is what a run found.
type Report struct {
	Seed       uint64
	Ops        int // operations in the checked history
	Unknown    int // of which outcome unknown
	Dropped    int // calls that never reached a replica
	Replays    int // requests re-sent with an old request_id
	Faults     int
	FaultKinds map[string]int
	// Violations lists everything found wrong: a history that is not
	// linearizable, a retry answered differently, a final state that
	// breaks a rule. Empty is the only pass.
	Violations []string
	// Inconclusive is set when the checker ran out of time.
	Inconclusive bool
	// BadRequests are requests the IPAM found malformed (workload bugs).
	BadRequests []string
	// History is where the history was saved (always, for a replay).
	History string
	// Visualization is a failing history drawn by porcupine (HTML).
	Visualization string
	CheckTime     time.Duration
}

// Run starts a cluster, runs the workload with faults, checks the history
// and audits the final state.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	rep := &Report{Seed: cfg.Seed, FaultKinds: map[string]int{}}
	c, err := StartCluster(ctx, ClusterConfig{Etcd: cfg.Etcd, IPAMD: cfg.IPAMD, Dir: cfg.Dir,
		Replicas: cfg.Replicas, Members: cfg.Members, Cut: cfg.Cut})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var conns []grpc.ClientConnInterface
	for _, addr := range c.Addrs {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		defer func() { _ = conn.Close() }()
		conns = append(conns, conn)
	}
	pools := Workload()
	if err := CreatePools(ctx, conns[0], pools); err != nil {
		return nil, err
	}
	rec := &Recorder{}
	if err := Load(ctx, cfg, pools, conns, rec, func(ctx context.Context, rng *rand.Rand) {
		if cfg.Faults {
			f := &Faults{C: c, Rand: rng, Cut: cfg.Cut, Logf: cfg.Logf}
			f.Run(ctx)
			rep.Faults, rep.FaultKinds = f.Count, f.Kinds
		}
	}); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, c.Tail(20))
	}
	audit(ctx, cfg, pools, conns, rec, rep)
	checkWith(cfg, pools, rec, rep)
	return rep, nil
}

// Load runs cfg.Clients clients for cfg.Duration against conns while
// faults (if not nil) runs, then heals, and reads every owner once more.
func Load(ctx context.Context, cfg Config, pools []Pool, conns []grpc.ClientConnInterface, rec *Recorder, faults func(context.Context, *rand.Rand)) error {
	loadCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		cl := &Client{ID: i, Pools: pools, Conns: conns, Rec: rec, Rand: rand.New(rand.NewPCG(cfg.Seed, uint64(i))), NoRequestIDs: cfg.NoRequestIDs}
		wg.Go(func() { cl.Run(loadCtx) })
	}
	if faults != nil {
		wg.Go(func() { faults(loadCtx, rand.New(rand.NewPCG(cfg.Seed, 1<<32))) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	// Every owner read once more through each replica: the final state
	// is part of the history the checker must explain.
	final := &Client{ID: cfg.Clients, Pools: pools, Rec: rec, Rand: rand.New(rand.NewPCG(cfg.Seed, 1<<33))}
	for r := range conns {
		final.Conns = conns[r : r+1]
		for pi := range pools {
			for oi := range pools[pi].Owners {
				final.Do(ctx, Input{Pool: pi, Owner: oi, Kind: OpGet})
			}
		}
	}
	return nil
}

// checkWith checks the recorded history with porcupine against the model
// of pools and adds what it finds to rep; the history is saved in cfg.Dir
// whatever the result.
func checkWith(cfg Config, pools []Pool, rec *Recorder, rep *Report) {
	ops := rec.Operations()
	rep.Ops, rep.Unknown, rep.Dropped, rep.Replays = len(ops), rec.Unknown, rec.Dropped, rec.Replays
	rep.BadRequests = rec.BadRequests
	rep.Violations = append(rep.Violations, rec.Mismatches...)
	rep.History = filepath.Join(cfg.Dir, "history.json")
	if err := SaveHistory(rep.History, cfg.Seed, ops); err != nil {
		cfg.Logf("saving the history: %v", err)
	}
	model := NewModel(pools).Porcupine()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, ops, cfg.CheckTimeout)
	rep.CheckTime = time.Since(start)
	switch res {
	case porcupine.Illegal:
		rep.Violations = append(rep.Violations, "the history is not linearizable:\n"+Explain(pools, ops, info))
		rep.Visualization = filepath.Join(cfg.Dir, "history.html")
		if err := porcupine.VisualizePath(model, info, rep.Visualization); err != nil {
			cfg.Logf("drawing the history: %v", err)
		}
	case porcupine.Unknown:
		rep.Inconclusive = true
	}
}

// Replay checks a saved history again, and draws it.
func Replay(path, html string) (porcupine.CheckResult, string, error) {
	_, ops, err := LoadHistory(path)
	if err != nil {
		return porcupine.Unknown, "", err
	}
	pools := Workload()
	model := NewModel(pools).Porcupine()
	res, info := porcupine.CheckOperationsVerbose(model, ops, 0)
	what := fmt.Sprintf("%d operations: %s", len(ops), res)
	if res == porcupine.Illegal {
		what += "\n" + Explain(pools, ops, info)
	}
	if html != "" {
		if err := porcupine.VisualizePath(model, info, html); err != nil {
			return res, what, err
		}
	}
	return res, what, nil
}

// TempDir makes a directory for a run's logs and data.
func TempDir(parent string) (string, error) {
	if parent != "" {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return "", err
		}
	}
	return os.MkdirTemp(parent, "robustness-")
}

// ErrViolations is returned by callers that fail on a report's violations.
var ErrViolations = errors.New("robustness: violations found")
