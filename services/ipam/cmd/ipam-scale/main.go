// Command ipam-scale runs the IPAM's scale benchmarks (package
// internal/scalebench) and prints one line "BENCH <name> <value> <unit>" per
// figure on stdout; progress and the growth tables go to stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/beaconlb/beacon/services/ipam/internal/bench"
	"github.com/beaconlb/beacon/services/ipam/internal/scalebench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ipam-scale:", err)
		os.Exit(1)
	}
}

func run() (err error) {
	fs := flag.NewFlagSet("ipam-scale", flag.ContinueOnError)
	ipamd := fs.String("ipamd", "", "the ipamd binary")
	ipamdBefore := fs.String("ipamd-before", "", "coldstart: another ipamd binary (before a change): its cold starts measured just before --ipamd's at each size, its list pages timed alternately with --ipamd's")
	distinct := fs.Bool("distinct-labels", false, "coldstart: give every allocation an owner label set of its own (default: 350 sets repeat)")
	etcd := fs.String("etcd", "", "the etcd binary, for the parts that run a 3-member etcd cluster (empty: embedded etcd)")
	only := fs.String("only", "", "comma-separated parts to run alone: "+strings.Join(scalebench.Parts(), ", ")+" (default: all)")
	quick := fs.Bool("quick", false, "run each part at its smallest sizes only")
	planSize := fs.String("plan-size", "", "the plan part's only size, TENANTSxALLOCATIONSxNODES per tenant (e.g. 1x100000x300: one very large tenant)")
	planNoFeed := fs.Bool("plan-no-feed", false, "skip the plan part's feed phase (gRPC subscribers)")
	out := fs.String("out", "", "also append the BENCH lines to this file")
	reconnectSizes := fs.String("reconnect-sizes", "", "comma-separated numbers of announcers: the reconnect part runs these sizes only, without its L2 moves")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := scalebench.Config{IPAMD: *ipamd, IPAMDBefore: *ipamdBefore, DistinctLabels: *distinct, Etcd: *etcd, Quick: *quick, PlanSize: *planSize, PlanNoFeed: *planNoFeed, Log: os.Stderr}
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}
	for f := range strings.SplitSeq(*reconnectSizes, ",") {
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return fmt.Errorf("--reconnect-sizes: %q is not a number of announcers", f)
		}
		cfg.ReconnectSizes = append(cfg.ReconnectSizes, n)
	}
	figs, runErr := scalebench.Run(ctx, cfg)
	if err := bench.WriteLines(os.Stdout, figs); err != nil {
		return errors.Join(runErr, err)
	}
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return errors.Join(runErr, err)
		}
		defer func() { err = errors.Join(err, f.Close()) }()
		if err := bench.WriteLines(f, figs); err != nil {
			return errors.Join(runErr, err)
		}
	}
	return runErr
}
