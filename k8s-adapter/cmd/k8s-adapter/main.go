// Command k8s-adapter is Beacon's Kubernetes adapter, one per cluster: it
// gives LoadBalancer Services addresses from the IPAM, writes them into
// their status, reports the nodes with ready endpoints, and imports
// MetalLB's configuration resources. Several replicas may run; a Lease picks
// the one that acts.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
	"github.com/beaconlb/beacon/pkg/telemetry"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8s-adapter:", err)
		os.Exit(2)
	}
	if cfg.Version {
		fmt.Printf("k8s-adapter %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return
	}
	logger, err := telemetry.NewLogger(os.Stderr, cfg.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8s-adapter:", err)
		os.Exit(2)
	}
	// client-go logs through klog, a process-wide logger.
	kube.SetKlogLogger(logger.With("component", "client-go"))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, logger); err != nil {
		logger.Error("k8s-adapter stopped", "error", err)
		os.Exit(1)
	}
}
