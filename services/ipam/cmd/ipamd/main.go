// Command ipamd is Beacon's IPAM service: pools and allocations in etcd,
// served over gRPC. With no --etcd-endpoints it embeds etcd, so one command
// runs a working IPAM.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/beaconlb/beacon/pkg/telemetry"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ipamd:", err)
		os.Exit(2)
	}
	if cfg.Version {
		fmt.Printf("ipamd %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return
	}
	logger, err := telemetry.NewLogger(os.Stderr, cfg.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ipamd:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, logger); err != nil {
		logger.Error("ipamd stopped", "error", err)
		os.Exit(1)
	}
}
