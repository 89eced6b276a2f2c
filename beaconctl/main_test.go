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

	"google.golang.org/grpc"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// The test binary doubles as beaconctl when BEACONCTL_TEST_MAIN is set, so
// that exit codes and signals are tested on the real main.
func TestMain(m *testing.M) {
	if os.Getenv("BEACONCTL_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
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

type watchServer struct {
	ipamv1.UnimplementedAllocationServiceServer
}

func (watchServer) WatchAllocations(_ *ipamv1.WatchAllocationsRequest, stream grpc.ServerStreamingServer[ipamv1.WatchAllocationsResponse]) error {
	err := stream.Send(&ipamv1.WatchAllocationsResponse{
		Events: []*ipamv1.AllocationEvent{{
			Type:       ipamv1.AllocationEvent_TYPE_EXISTING,
			Allocation: &ipamv1.Allocation{Name: "tenants/acme/allocations/a1", Owner: "default/web", Addresses: []string{"192.0.2.7"}, Pool: "pools/web"},
		}},
		ResumeToken:      "r1",
		SnapshotComplete: true,
	})
	if err != nil {
		return err
	}
	<-stream.Context().Done()
	return stream.Context().Err()
}

func TestWatchStopsOnInterrupt(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	ipamv1.RegisterAllocationServiceServer(s, watchServer{})
	go func() { _ = s.Serve(lis) }()
	defer s.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := beaconctl(ctx, "--plaintext", "--server", lis.Addr().String(), "alloc", "watch")
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
	if want := "EXISTING tenants/acme/allocations/a1 default/web 192.0.2.7 pools/web\n"; line != want {
		t.Errorf("event line %q, want %q", line, want)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("watch ended with %v after Ctrl-C, want exit 0; stderr: %s", err, stderr.String())
	}
	if want := "watch stopped; resume with --resume r1\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}
