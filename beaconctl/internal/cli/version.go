package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/beaconlb/beacon/beaconctl/internal/output"
)

// Version is beaconctl's version, set at build time with
//
//	-ldflags "-X github.com/beaconlb/beacon/beaconctl/internal/cli.Version=v1.2.3"
//
// When unset, the module version from the build info is used, or "devel".
var Version = ""

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

func newVersionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print beaconctl's version",
		Long:    "Print beaconctl's version, and the Go version and platform it was built with. It does not contact the server.",
		Example: "  beaconctl version\n  beaconctl version -o json",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			v, goVersion, platform := version(), runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
			switch g.output {
			case output.JSON:
				s, err := structpb.NewStruct(map[string]any{"version": v, "go": goVersion, "platform": platform})
				if err != nil {
					return err
				}
				return output.WriteJSON(w, s)
			case output.Name:
				return output.WriteNames(w, v)
			}
			_, err := fmt.Fprintf(w, "beaconctl %s (%s %s)\n", v, goVersion, platform)
			return err
		},
	}
}
