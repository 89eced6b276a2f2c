// Command robustness runs the IPAM's robustness harness (package
// robustness): clients against real ipamd replicas on a 3-member etcd
// cluster under faults, every history checked with porcupine and every
// final state audited. It prints one line per run, then
//
//	BENCH robustness_ops N ops              operations checked, over every run
//	BENCH robustness_faults N faults        faults injected, over every run
//	BENCH robustness_violations N count     violations found (0 is the only pass)
//
// and exits non-zero if any run found a violation. A failing run keeps its
// directory (history.json, history.html, the processes' logs).
//
//	robustness --runs 10 --duration 60s          ten runs with random seeds
//	robustness --seed 42 --duration 30s          the same workload and faults schedule again
//	robustness --check DIR/history.json          check a saved history again and draw it
//
// Cutting replicas from etcd needs root (iptables); without it the runs
// use the other faults and say so.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/beaconlb/beacon/tests/integration/e2e"
	"github.com/beaconlb/beacon/tests/integration/robustness"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "robustness:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("robustness", flag.ContinueOnError)
	seed := fs.Uint64("seed", 0, "seed of the first run (0: random); run i uses seed+i")
	runs := fs.Int("runs", 1, "how many runs")
	duration := fs.Duration("duration", 30*time.Second, "load time of each run")
	clients := fs.Int("clients", 16, "concurrent clients")
	faults := fs.Bool("faults", true, "inject faults")
	etcd := fs.String("etcd", defaultEtcd(), "the etcd binary (make testbins)")
	dir := fs.String("dir", "", "where runs keep their logs (default: a temporary directory; removed after a passing run)")
	check := fs.String("check", "", "check this saved history.json again instead of running, and draw it next to it")
	out := fs.String("out", "", "also append the BENCH lines to this file")
	checkTimeout := fs.Duration("check-timeout", 10*time.Minute, "longest linearizability check of one run (a run that needs longer is inconclusive)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if *check != "" {
		html := strings.TrimSuffix(*check, ".json") + ".html"
		res, what, err := robustness.Replay(*check, html)
		if err != nil {
			return err
		}
		fmt.Printf("%s\n(drawn in %s)\n", what, html)
		if res != "Ok" {
			return robustness.ErrViolations
		}
		return nil
	}
	bins, err := e2e.Binaries()
	if err != nil {
		return err
	}
	if *seed == 0 {
		*seed = rand.Uint64N(1 << 40)
	}
	cut := os.Geteuid() == 0
	if !cut {
		fmt.Fprintln(os.Stderr, "robustness: NOT cutting replicas from etcd: that needs root (iptables)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var ops, nfaults, violations int
	for i := range *runs {
		s := *seed + uint64(i)
		d, err := robustness.TempDir(*dir)
		if err != nil {
			return err
		}
		rep, err := robustness.Run(ctx, robustness.Config{
			Seed: s, Duration: *duration, Clients: *clients, Replicas: 3, Members: 3,
			Faults: *faults, Cut: cut, Etcd: *etcd, IPAMD: filepath.Join(bins, "ipamd"), Dir: d, CheckTimeout: *checkTimeout,
			Logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) },
		})
		if err != nil {
			return fmt.Errorf("run %d (seed %d, logs in %s): %w", i, s, d, err)
		}
		ops += rep.Ops
		nfaults += rep.Faults
		violations += len(rep.Violations) + len(rep.BadRequests)
		fmt.Fprintf(os.Stderr, "run %d seed %d: %d ops (%d unknown, %d never sent), %d replays, %d faults %v, checked in %v, %d violations\n",
			i, s, rep.Ops, rep.Unknown, rep.Dropped, rep.Replays, rep.Faults, rep.FaultKinds, rep.CheckTime.Round(time.Millisecond), len(rep.Violations))
		for _, v := range append(rep.Violations, rep.BadRequests...) {
			fmt.Fprintln(os.Stderr, "  VIOLATION:", v)
		}
		if rep.Inconclusive {
			fmt.Fprintln(os.Stderr, "  the checker ran out of time: inconclusive")
		}
		if len(rep.Violations)+len(rep.BadRequests) > 0 || rep.Inconclusive {
			fmt.Fprintf(os.Stderr, "  kept %s; check again: go run ./tests/integration/cmd/robustness --check %s; run again: go run ./tests/integration/cmd/robustness --seed %d --duration %v\n",
				d, rep.History, s, *duration)
		} else if *dir == "" {
			_ = os.RemoveAll(d)
		}
	}
	lines := fmt.Sprintf("BENCH robustness_ops %d ops\nBENCH robustness_faults %d faults\nBENCH robustness_violations %d count\n", ops, nfaults, violations)
	w := io.Writer(os.Stdout)
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		w = io.MultiWriter(os.Stdout, f)
	}
	fmt.Fprint(w, lines)
	if violations > 0 {
		return robustness.ErrViolations
	}
	return nil
}

// defaultEtcd is the etcd `make testbins` builds.
func defaultEtcd() string {
	if d := os.Getenv("BEACON_TESTBINS"); d != "" {
		return filepath.Join(d, "etcd")
	}
	if d := os.Getenv("BEACON_CACHE"); d != "" {
		return filepath.Join(d, "testbins", "etcd")
	}
	return ".cache/testbins/etcd"
}
