// Command ipamd is Beacon's IPAM service: pools and allocations in etcd,
// served over gRPC. With no --etcd-endpoints it embeds etcd, so one command
// runs a working IPAM.
package main

import (
	"os"

	"github.com/beaconlb/beacon/pkg/daemon"
)

func main() {
	daemon.Main(daemon.Daemon[config]{
		Name: "ipamd", Version: version,
		Parse:  func() (config, error) { return parseConfig(os.Args[1:], os.Getenv) },
		Basics: func(c config) (bool, string) { return c.Version, c.LogLevel },
		Run:    run,
	})
}
