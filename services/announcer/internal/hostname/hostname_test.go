package hostname

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The test binary doubles as the announcer: with envTest set it calls
// Adopt and prints the host name it then has.
const (
	envTest = "BEACON_HOSTNAME_TEST_WANT"
	// exitPrinted is the code the process that printed exits with.
	exitPrinted = 7
)

func TestMain(m *testing.M) {
	if want, ok := os.LookupEnv(envTest); ok {
		logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
		Adopt(want, logger)
		h, err := os.Hostname()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(os.Getpid(), h)
		os.Exit(exitPrinted)
	}
	os.Exit(m.Run())
}

func TestAdopt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED TestAdopt: needs root (CAP_SYS_ADMIN) for a UTS namespace; run as root")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, want, printed string
	}{
		{"another name: re-executed, same PID, in a namespace of its own", "beacon-node-7", "beacon-node-7"},
		{"the host name already", own, own},
		{"no name: unchanged", "", own},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), envTest+"="+tt.want)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitPrinted {
				t.Fatalf("exit: %v, want code %d; stderr: %s", err, exitPrinted, errOut.String())
			}
			if diff := cmp.Diff(fmt.Sprintf("%d %s\n", cmd.Process.Pid, tt.printed), out.String()); diff != "" {
				t.Errorf("PID and host name the announcer ends with (-want +got):\n%s", diff)
			}
			if errOut.Len() > 0 {
				t.Errorf("logged: %s", errOut.String())
			}
		})
	}
	if h, _ := os.Hostname(); h != own {
		t.Errorf("the machine's host name changed: %q, was %q", h, own)
	}
}
