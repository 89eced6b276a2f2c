// Command gatewayd is Beacon's front door: TLS, authentication (client
// certificates and bearer tokens), tenant authorization, rate and size
// limits, gRPC and REST/JSON on one listener, in front of the IPAM
// replicas. See docs/gateway.md.
package main

import (
	"os"

	"github.com/beaconlb/beacon/pkg/daemon"
)

func main() {
	daemon.Main(daemon.Daemon[config]{
		Name: "gatewayd", Version: version,
		Parse:  func() (config, error) { return parseConfig(os.Args[1:], os.Getenv) },
		Basics: func(c config) (bool, string) { return c.Version, c.LogLevel },
		Run:    run,
	})
}
