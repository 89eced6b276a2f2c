// Command k8s-adapter is Beacon's Kubernetes adapter, one per cluster: it
// gives LoadBalancer Services addresses from the IPAM, writes them into
// their status, reports the nodes with ready endpoints, and imports
// MetalLB's configuration resources. Several replicas may run; a Lease picks
// the one that acts.
package main

import (
	"log/slog"
	"os"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
	"github.com/beaconlb/beacon/pkg/daemon"
)

func main() {
	daemon.Main(daemon.Daemon[config]{
		Name: "k8s-adapter", Version: version,
		Parse:  func() (config, error) { return parseConfig(os.Args[1:], os.Getenv) },
		Basics: func(c config) (bool, string) { return c.Version, c.LogLevel },
		// client-go logs through klog, a process-wide logger.
		Prepare: func(_ config, logger *slog.Logger) { kube.SetKlogLogger(logger.With("component", "client-go")) },
		Run:     run,
	})
}
