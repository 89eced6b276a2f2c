// Package hostname gives the announcer process the host name its BGP peers
// should see. GoBGP v4 puts os.Hostname() into the hostname capability of
// every OPEN it sends (FRR shows it as the neighbor's "Hostname"), with no
// option to send another name; on hosts where the host name is not the node
// name (several announcers on one machine, a lab of network namespaces, a
// node whose Kubernetes name differs from its host name) every node would
// show up under one name. Adopt re-runs the announcer in a UTS namespace of
// its own whose host name is the node name: the only way to change what
// os.Hostname returns for every thread of a Go process.
//
// It imports only the standard library; announcerd's main calls Adopt
// first thing.
package hostname

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
)

// envName marks the re-run process and carries the name it must take.
const envName = "BEACON_ANNOUNCER_UTS_HOSTNAME"

// ErrTooLong is returned for a name the kernel cannot hold (64 bytes).
var ErrTooLong = errors.New("hostname: longer than 64 bytes")

// Adopt makes name the process's host name, as far as it can:
//
//   - When name is empty or already the host name, it does nothing.
//   - In the process it re-ran (marked by the environment), it sets the
//     host name of that process's own UTS namespace and returns.
//   - Otherwise it re-runs the current binary, with the same arguments and
//     standard streams, in a new UTS namespace (which needs CAP_SYS_ADMIN),
//     forwards SIGINT, SIGTERM and SIGHUP to it, waits for it and returns
//     its exit code with done set: the caller exits with that code. The
//     re-run process dies with the caller (parent-death signal SIGKILL).
//
// When the namespace cannot be made, Adopt logs a warning naming the host
// name peers will see instead and returns with done unset: the caller goes
// on in this process.
func Adopt(name string, logger *slog.Logger) (code int, done bool) {
	if name == "" {
		return 0, false
	}
	if want, child := os.LookupEnv(envName); child {
		_ = os.Unsetenv(envName)
		if err := set(want); err != nil {
			logger.Warn("could not set the host name BGP peers see", "hostname", want, "error", err)
		}
		return 0, false
	}
	current, _ := os.Hostname()
	if current == name {
		return 0, false
	}
	if len(name) > 64 {
		logger.Warn("BGP peers will see the OS host name", "hostname", current, "wanted", name, "error", ErrTooLong)
		return 0, false
	}
	code, err := rerun(name)
	if err != nil {
		logger.Warn("BGP peers will see the OS host name: no UTS namespace of its own (CAP_SYS_ADMIN?)", "hostname", current, "wanted", name, "error", err)
		return 0, false
	}
	return code, true
}

func set(name string) error {
	if len(name) > 64 {
		return ErrTooLong
	}
	if err := syscall.Sethostname([]byte(name)); err != nil {
		return fmt.Errorf("hostname: sethostname: %w", err)
	}
	return nil
}

// rerun runs /proc/self/exe in a new UTS namespace with name marked in its
// environment and returns its exit code. An error means it never started.
func rerun(name string) (int, error) {
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Args[0] = os.Args[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envName+"="+name)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUTS, Pdeathsig: syscall.SIGKILL}
	// The parent-death signal follows the thread that started the
	// process: keep this one until the process is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("hostname: start in a new UTS namespace: %w", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case <-waited:
			st := cmd.ProcessState
			if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return 128 + int(ws.Signal()), nil
			}
			return st.ExitCode(), nil
		}
	}
}
