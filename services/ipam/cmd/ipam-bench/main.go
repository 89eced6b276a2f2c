// Command ipam-bench measures the IPAM against a raw etcd baseline on an
// embedded etcd, and its free-address search, and prints one line
// "BENCH <name> <value> <unit>" per figure on stdout; progress and a human
// table go to stderr. See package internal/bench.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ipam-bench:", err)
		os.Exit(1)
	}
}

func run() (err error) {
	fs := flag.NewFlagSet("ipam-bench", flag.ContinueOnError)
	duration := fs.Duration("duration", 5*time.Second, "how long each load is measured")
	slice := fs.Duration("slice", time.Second, "raw etcd and Beacon take turns in windows of about this long")
	warmup := fs.Duration("warmup", time.Second, "how long each load runs before it is measured")
	conc := fs.String("concurrency", "1,8,64", "comma-separated numbers of concurrent callers")
	workers := fs.Int("commit-workers", 0, "the replica's concurrent etcd transactions (0: its default)")
	out := fs.String("out", "", "also append the BENCH lines to this file")
	only := fs.String("only", "", "comma-separated parts to run alone: free, plan, raw, beacon, raw3, echo, rawleader, fanout, coldstart (default: all)")
	ipamd := fs.String("ipamd", "", "the ipamd binary the coldstart part starts (default: built with go build)")
	coldAllocs := fs.Int("coldstart-allocations", 100_000, "allocations stored before the coldstart part's measured starts")
	etcdProcess := fs.Bool("etcd-process", false, "run etcd in a child process (as a separate etcd cluster in production) instead of in the benchmark's own process (as ipamd embeds it)")
	dial := fs.Bool("dial", false, "the replica reaches the embedded etcd over loopback, as an external client would, instead of in process as ipamd does")
	etcdCluster := fs.String("etcd-cluster", "", "run the load against a cluster of real etcd processes started from this etcd binary (see --etcd-members)")
	etcdMembers := fs.Int("etcd-members", 3, "the size of the --etcd-cluster")
	leaderKills := fs.Int("leader-kills", 0, "instead of the loads: kill the leader of a 3-member --etcd-cluster this many times under a write load and report the write gap (etcd_leader_loss_write_gap_*)")
	suffix := fs.String("suffix", "", "append this to the name of every load figure (e.g. _etcd3)")
	serveEtcd := fs.String("serve-etcd", "", "internal: serve an embedded etcd with its data in this directory (the child process of --etcd-process)")
	memprofile := fs.String("memprofile", "", "write an allocation profile of the whole run to this file")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	cs, err := parseInts(*conc)
	if err != nil {
		return fmt.Errorf("--concurrency: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *serveEtcd != "" {
		return bench.ServeEtcd(ctx, *serveEtcd, os.Stdout)
	}
	var etcdCommand []string
	if *etcdProcess {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("--etcd-process: %w", err)
		}
		etcdCommand = []string{self, "--serve-etcd"}
	}

	if *cpuprofile != "" {
		stopProfile, perr := startProfile(*cpuprofile)
		if perr != nil {
			return perr
		}
		defer func() { err = errors.Join(err, stopProfile()) }()
	}

	if *memprofile != "" {
		defer func() { err = errors.Join(err, writeHeapProfile(*memprofile)) }()
	}
	var figs []bench.Figure
	parts := parseList(*only)
	if *leaderKills == 0 && (len(parts) == 0 || slices.Contains(parts, "coldstart")) {
		bin := *ipamd
		if bin == "" {
			if bin, err = buildIPAMD(); err != nil {
				return err
			}
		}
		cold, err := bench.ColdStart(ctx, bench.ColdStartConfig{IPAMD: bin, Allocations: *coldAllocs, Log: os.Stderr})
		if err != nil {
			return fmt.Errorf("coldstart: %w", err)
		}
		figs = append(figs, cold...)
		if parts = slices.DeleteFunc(parts, func(p string) bool { return p == "coldstart" }); len(parts) == 0 && *only != "" {
			return writeFigures(figs, *out)
		}
	}
	var more []bench.Figure
	if *leaderKills > 0 {
		if *etcdCluster == "" {
			return errors.New("--leader-kills needs --etcd-cluster")
		}
		more, err = bench.LeaderLoss(ctx, bench.LeaderLossConfig{Binary: *etcdCluster, Kills: *leaderKills, Log: os.Stderr})
	} else {
		more, err = bench.Run(ctx, bench.Config{Duration: *duration, Slice: *slice, Warmup: *warmup, Concurrency: cs, CommitWorkers: *workers, Only: parts, EtcdCommand: etcdCommand,
			Cluster: bench.EtcdCluster{Binary: *etcdCluster, Members: *etcdMembers}, Dial: *dial, Suffix: *suffix, Log: os.Stderr})
	}
	if err != nil {
		return err
	}
	return writeFigures(append(more, figs...), *out)
}

// writeFigures writes the BENCH lines to stdout, and appends them to out
// if it is set.
func writeFigures(figs []bench.Figure, out string) error {
	if err := bench.WriteLines(os.Stdout, figs); err != nil {
		return err
	}
	if out != "" {
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644) //nolint:gosec // a results file
		if err != nil {
			return err
		}
		if err := bench.WriteLines(f, figs); err != nil {
			return errors.Join(err, f.Close())
		}
		return f.Close()
	}
	return nil
}

// buildIPAMD builds ipamd with the go command into a temporary directory
// (run from inside the repository, whose go.work it needs).
func buildIPAMD() (string, error) {
	dir, err := os.MkdirTemp("", "ipam-bench-ipamd-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ipamd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/beaconlb/beacon/services/ipam/cmd/ipamd").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ipamd: %w\n%s", err, out)
	}
	return bin, nil
}

// startProfile starts a CPU profile into path; the returned func stops it.
func startProfile(path string) (func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// writeHeapProfile writes the allocation profile (all allocations since
// start, see "go tool pprof -sample_index=alloc_space") to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func parseList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
