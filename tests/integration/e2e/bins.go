package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// The binaries Binaries provides, by name, with their packages.
var binaries = map[string]string{
	"ipamd":      "github.com/beaconlb/beacon/services/ipam/cmd/ipamd",
	"announcerd": "github.com/beaconlb/beacon/services/announcer/cmd/announcerd",
	"beaconctl":  "github.com/beaconlb/beacon/beaconctl",
	// For TestWholeChain.
	"gatewayd":    "github.com/beaconlb/beacon/services/gateway/cmd/gatewayd",
	"k8s-adapter": "github.com/beaconlb/beacon/k8s-adapter/cmd/k8s-adapter",
}

var (
	buildOnce sync.Once
	builtDir  string
	buildErr  error
)

// Binaries returns the directory holding ipamd, announcerd, beaconctl,
// gatewayd and k8s-adapter:
// $BEACON_BIN when set (`make test-integration` builds them into bin/),
// else a temporary directory they are built into, once per process, with
// the go command (which needs the repository's go.work: run from inside
// the repository).
func Binaries() (string, error) {
	if d := os.Getenv("BEACON_BIN"); d != "" {
		for name := range binaries {
			if _, err := os.Stat(filepath.Join(d, name)); err != nil {
				return "", fmt.Errorf("e2e: BEACON_BIN=%s: %w (run `make build`)", d, err)
			}
		}
		return d, nil
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "beacon-bin-")
		if err != nil {
			buildErr = err
			return
		}
		for name, pkg := range binaries {
			out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("e2e: build %s: %w\n%s", pkg, err, out)
				return
			}
		}
		builtDir = dir
	})
	return builtDir, buildErr
}
