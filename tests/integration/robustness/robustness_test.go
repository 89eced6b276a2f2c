package robustness

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// etcdBinary finds the etcd `make testbins` builds.
func etcdBinary() (string, error) {
	dirs := []string{os.Getenv("BEACON_TESTBINS")}
	if c := os.Getenv("BEACON_CACHE"); c != "" {
		dirs = append(dirs, filepath.Join(c, "testbins"))
	}
	dirs = append(dirs, filepath.Join("..", "..", "..", ".cache", "testbins"))
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p := filepath.Join(d, "etcd")
		if _, err := os.Stat(p); err == nil {
			return filepath.Abs(p)
		}
	}
	return "", errors.New("no etcd binary: run `make testbins` (or set BEACON_TESTBINS)")
}

// The short robustness run of `make test`: 16 clients against 3 ipamd
// replicas on a 3-member etcd cluster for 30 s, with replicas and the etcd
// leader killed, replicas frozen and (as root) cut from etcd; the history
// must be linearizable, every retry must get its first answer, and the
// final state must pass the audit. BEACON_ROBUSTNESS_SEED runs a given
// seed again; `make bench` runs longer ones (cmd/robustness).
func TestRobustness(t *testing.T) {
	etcd, err := etcdBinary()
	if err != nil {
		if os.Getenv("BEACON_TESTBINS_REQUIRED") != "" {
			t.Fatal(err)
		}
		t.Skipf("SKIPPING the robustness run: %v", err)
	}
	bins, err := e2e.Binaries()
	if err != nil {
		t.Fatal(err)
	}
	seed := rand.Uint64N(1 << 40)
	if s := os.Getenv("BEACON_ROBUSTNESS_SEED"); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("BEACON_ROBUSTNESS_SEED: %v", err)
		}
	}
	cut := os.Geteuid() == 0
	if !cut {
		t.Log("NOT cutting replicas from etcd: that needs root (iptables); the other faults run")
	}
	dir, err := os.MkdirTemp("", "robustness-")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Config{
		Seed: seed, Duration: 30 * time.Second, Clients: 16, Replicas: 3, Members: 3,
		Faults: true, Cut: cut, Etcd: etcd, IPAMD: filepath.Join(bins, "ipamd"), Dir: dir,
		CheckTimeout: 5 * time.Minute, Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("seed %d (logs in %s): %v", seed, dir, err)
	}
	t.Logf("seed %d: %d operations (%d of unknown outcome, %d never sent), %d replays, %d faults %v, checked in %v",
		seed, rep.Ops, rep.Unknown, rep.Dropped, rep.Replays, rep.Faults, rep.FaultKinds, rep.CheckTime.Round(time.Millisecond))
	failed := len(rep.Violations)+len(rep.BadRequests) > 0 || rep.Inconclusive
	for _, v := range append(rep.Violations, rep.BadRequests...) {
		t.Errorf("VIOLATION: %s", v)
	}
	if rep.Inconclusive {
		t.Errorf("the checker ran out of time: inconclusive")
	}
	if failed {
		t.Logf("kept %s; check again: go run ./tests/integration/cmd/robustness --check %s\nrun again: BEACON_ROBUSTNESS_SEED=%d make test-robustness",
			dir, rep.History, seed)
		return
	}
	if rep.Faults == 0 || rep.Ops < 500 {
		t.Errorf("too little happened to prove anything: %d faults, %d operations", rep.Faults, rep.Ops)
	}
	_ = os.RemoveAll(dir)
}
