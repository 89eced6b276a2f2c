// Command gatewayd is Beacon's front door: TLS, authentication (client
// certificates and bearer tokens), tenant authorization, rate and size
// limits, gRPC and REST/JSON on one listener, in front of the IPAM
// replicas. See docs/gateway.md.
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
		fmt.Fprintln(os.Stderr, "gatewayd:", err)
		os.Exit(2)
	}
	if cfg.Version {
		fmt.Printf("gatewayd %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return
	}
	logger, err := telemetry.NewLogger(os.Stderr, cfg.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gatewayd:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, logger); err != nil {
		logger.Error("gatewayd stopped", "error", err)
		os.Exit(1)
	}
}
