// Command announce-bench measures announcement with the real ipamd and
// announcerd in network namespaces (see package e2e) and prints one line
// "BENCH <name> <value> ms" per figure on stdout; progress goes to stderr.
//
//	BENCH l2_failover_kill_p50, _p99               announcerd SIGKILLed → client's entry at the new node
//	BENCH l2_failover_linkdown_sepmgmt_p50, _p99   owner's eth0 down, IPAM over a separate management link → the same
//	BENCH l2_failover_linkdown_samelink_p50, _p99  owner's eth0 down, IPAM over that same eth0 → the same
//	BENCH l2_failover_hang_p50, _p99               announcerd SIGSTOPped → the same (heartbeat watchdog)
//	BENCH l2_drain_outage_p50, _p99                DrainAnnouncer: old owner's last ARP answer → client at the new node
//	BENCH bgp_bfd_withdraw_p50, _p99               node silenced (egress dropped) → route gone from FRR's kernel, BFD 50 ms × 3
//	BENCH l2_stale_replies_after_freeze            most ARP replies an owner sent after its addresses moved, when frozen or cut off (count; 0 passes)
//	BENCH l2_wrong_owner_ms                        longest time the client's entry pointed at a node that did not own the address then
//	BENCH restart_route_withdrawals                rolling restarts of 3 IPAM replicas: FRR polls missing a path + UPDATEs + dropped sessions (count; 0 passes)
//	BENCH restart_l2_owner_changes                 the same restarts: other MACs answering ARP for the L2 address + owner moved (count; 0 passes)
//	BENCH restart_l2_withheld                      the same restarts: ARP replies the owner withheld for want of a right to answer (count; 0 passes)
//	BENCH restart_l2_reply_gap_max                 the same restarts: longest gap in the L2 owner's ARP replies (probed every 5 ms)
//	BENCH restart_kill_*                           the same with SIGKILL instead of SIGTERM (crashes; withheld replies expected, nothing else)
//	BENCH global_withdraw_no_endpoints_p50, _p99   a global group's member loses its ready endpoints → its path gone from FRR (the other cluster's stays)
//	BENCH local_withdraw_no_endpoints_p50, _p99    the reference: a one-cluster LOCAL Service loses its endpoints → its path gone from FRR
//
// It needs root, and ipamd and announcerd in $BEACON_BIN (`make build`), or
// builds them when BEACON_BIN is unset. With the default trials it takes
// about four minutes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/beaconlb/beacon/tests/integration/e2e"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "announce-bench:", err)
		os.Exit(1)
	}
}

func run() (err error) {
	fs := flag.NewFlagSet("announce-bench", flag.ContinueOnError)
	l2 := fs.Int("l2-trials", 20, "trials of each L2 failover kind (kill, link down in both topologies, drain)")
	hang := fs.Int("hang-trials", 5, "trials of the hung-announcer failover")
	bfd := fs.Int("bfd-trials", 10, "trials of the BFD withdrawal")
	stale := fs.Int("stale-rounds", 3, "rounds of owner freezes and egress cuts (six trials each, about 25 s)")
	globals := fs.Int("global-trials", 20, "trials of the global address's withdrawal when a cluster's endpoints vanish (and of the one-cluster reference)")
	restarts := fs.Int("restart-rounds", 3, "rolling restarts of three IPAM replicas (about 2 s each; needs etcd from `make testbins`)")
	only := fs.String("only", "", "run only this part: restart or global (default: all)")
	out := fs.String("out", "", "also append the BENCH lines to this file")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if err := e2e.RequireRoot(); err != nil {
		return err
	}
	bin, err := e2e.Binaries()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	etcd, err := e2e.EtcdBinary()
	if err != nil {
		fmt.Fprintln(os.Stderr, "announce-bench:", err)
	}
	cfg := e2e.BenchConfig{Bin: bin, L2Trials: *l2, HangTrials: *hang, BFDTrials: *bfd, StaleRounds: *stale, RestartRounds: *restarts, GlobalTrials: *globals, EtcdBin: etcd, Log: os.Stderr}
	switch *only {
	case "":
	case "restart":
		cfg.L2Trials, cfg.HangTrials, cfg.BFDTrials, cfg.StaleRounds, cfg.GlobalTrials = 0, 0, 0, 0, 0
	case "global":
		cfg.L2Trials, cfg.HangTrials, cfg.BFDTrials, cfg.StaleRounds, cfg.RestartRounds = 0, 0, 0, 0, 0
	default:
		return fmt.Errorf("--only %q: want restart or global", *only)
	}
	start := time.Now()
	figs, err := e2e.Bench(ctx, cfg)
	fmt.Fprintf(os.Stderr, "announce-bench: %d figures in %v\n", len(figs), time.Since(start).Round(time.Second))
	var w io.Writer = os.Stdout
	if *out != "" {
		f, ferr := os.OpenFile(*out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if ferr != nil {
			return errors.Join(err, ferr)
		}
		defer func() { err = errors.Join(err, f.Close()) }()
		w = io.MultiWriter(os.Stdout, f)
	}
	for _, f := range figs {
		if _, werr := fmt.Fprintln(w, f.Line()); werr != nil {
			return errors.Join(err, werr)
		}
	}
	return err
}
