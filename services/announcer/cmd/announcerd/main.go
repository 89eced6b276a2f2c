// Command announcerd is Beacon's per-node announcer: it subscribes to its
// node's plan from the IPAM and makes it so over BGP (GoBGP as a library)
// and ARP/NDP on the node's interfaces.
package main

import (
	"log/slog"
	"os"

	"github.com/beaconlb/beacon/pkg/daemon"
	"github.com/beaconlb/beacon/services/announcer/internal/hostname"
)

func main() {
	daemon.Main(daemon.Daemon[config]{
		Name: "announcerd", Version: version,
		Parse: func() (config, error) {
			host, _ := os.Hostname()
			return parseConfig(os.Args[1:], os.Getenv, host)
		},
		Basics: func(c config) (bool, string) { return c.Version, c.LogLevel },
		// GoBGP sends peers os.Hostname(): make it the name peers should
		// see (this may re-execute announcerd in its own UTS namespace).
		Prepare: func(c config, logger *slog.Logger) { hostname.Adopt(c.BGPHostname, logger) },
		Run:     run,
	})
}
