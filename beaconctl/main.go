// Command beaconctl is the command-line client of Beacon's IPAM API.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/beaconlb/beacon/beaconctl/internal/cli"
	"github.com/beaconlb/beacon/beaconctl/internal/output"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first Ctrl-C, a second one kills at once.
		<-ctx.Done()
		stop()
	}()
	err := cli.NewRootCommand(cli.OSEnv()).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, output.FormatError(err))
		os.Exit(1)
	}
}
