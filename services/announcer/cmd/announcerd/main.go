// Command announcerd is Beacon's per-node announcer: it subscribes to its
// node's plan from the IPAM and makes it so over BGP (GoBGP as a library)
// and ARP/NDP on the node's interfaces.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/beaconlb/beacon/pkg/telemetry"
	"github.com/beaconlb/beacon/services/announcer/internal/hostname"
)

func main() {
	host, _ := os.Hostname()
	cfg, err := parseConfig(os.Args[1:], os.Getenv, host)
	if err != nil {
		fmt.Fprintln(os.Stderr, "announcerd:", err)
		os.Exit(2)
	}
	if cfg.Version {
		fmt.Printf("announcerd %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return
	}
	logger, err := telemetry.NewLogger(os.Stderr, cfg.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "announcerd:", err)
		os.Exit(2)
	}
	// GoBGP sends peers os.Hostname(): make it the name peers should see
	// (this may re-execute announcerd in its own UTS namespace).
	hostname.Adopt(cfg.BGPHostname, logger)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, logger); err != nil {
		logger.Error("announcerd stopped", "error", err)
		os.Exit(1)
	}
}
