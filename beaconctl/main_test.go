package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/beaconlb/beacon/pkg/ipamtest"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// The test binary doubles as beaconctl when BEACONCTL_TEST_MAIN is set, so
// that exit codes and signals are tested on the real main.
func TestMain(m *testing.M) {
	if os.Getenv("BEACONCTL_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	ipamtest.Main(m)
}

func beaconctl(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "BEACONCTL_TEST_MAIN=1", "BEACON_SERVER=", "BEACON_TOKEN=", "BEACON_CA=", "BEACON_CERT=", "BEACON_KEY=",
		"BEACON_CONFIG=", "XDG_CONFIG_HOME=", "HOME="+os.TempDir()+"/beaconctl-test-no-home")
	return cmd
}

func TestErrorExit(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // Nothing listens there now.

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := beaconctl(ctx, "--plaintext", "--server", addr, "pool", "list")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit code %d (%v), want 1", code, err)
	}
	if stdout.String() != "" {
		t.Errorf("stdout %q, want nothing", stdout.String())
	}
	if !strings.HasPrefix(stderr.String(), "error: Unavailable: ") || strings.Contains(stderr.String(), "goroutine") {
		t.Errorf("stderr %q, want one error: Unavailable message", stderr.String())
	}
}

func TestVersionExit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := beaconctl(ctx, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "beaconctl ") {
		t.Errorf("version: %q, %v", out, err)
	}
}

func TestWatchStopsOnInterrupt(t *testing.T) {
	// A real IPAM holding one allocation, which the watch's snapshot
	// brings.
	r := ipamtest.Start(t, ipamtest.Options{}).Replicas[0]
	cc := r.Conn(t)
	setup, cancelSetup := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancelSetup()
	if _, err := ipamv1.NewPoolServiceClient(cc).CreatePool(setup, &ipamv1.CreatePoolRequest{PoolId: "web", Pool: &ipamv1.Pool{Ranges: []string{"198.51.100.0/28"}}}); err != nil {
		t.Fatal(err)
	}
	a, err := ipamv1.NewAllocationServiceClient(cc).Allocate(setup, &ipamv1.AllocateRequest{Parent: "tenants/acme", Allocation: &ipamv1.Allocation{Owner: "default/web", RequestedAddresses: []string{"198.51.100.7"}}})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := beaconctl(ctx, "--plaintext", "--server", r.Addr, "alloc", "watch")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if want := "EXISTING " + a.GetAllocation().GetName() + " default/web 198.51.100.7 pools/web\n"; line != want {
		t.Errorf("event line %q, want %q", line, want)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("watch ended with %v after Ctrl-C, want exit 0; stderr: %s", err, stderr.String())
	}
	if got := stderr.String(); !strings.HasPrefix(got, "watch stopped; resume with --resume ") || strings.Count(got, "\n") != 1 {
		t.Errorf("stderr %q, want one line telling how to resume", got)
	}
}
