// Package hostname gives the announcer process the host name its BGP peers
// should see. GoBGP v4 puts os.Hostname() into the hostname capability of
// every OPEN it sends (FRR shows it as the neighbor's "Hostname"), with no
// option to send another name; on hosts where the host name is not the node
// name (several announcers on one machine, a lab of network namespaces, a
// node whose Kubernetes name differs from its host name) every node would
// show up under one name. Adopt moves the process into a UTS namespace of
// its own whose host name is the node name.
//
// A UTS namespace change applies to one thread, and os.Hostname may run on
// any thread of a Go process, so Adopt unshares the namespace on a locked
// thread, sets the name there and re-executes the binary from that thread:
// execve keeps the thread's namespaces and makes it the only thread. The
// process keeps its PID, arguments, environment and standard streams; it
// only starts over.
//
// It imports only the standard library; announcerd's main calls Adopt
// first thing.
package hostname

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"syscall"
)

// ErrTooLong is returned for a name the kernel cannot hold (64 bytes).
var ErrTooLong = errors.New("hostname: longer than 64 bytes")

// Adopt makes name the process's host name: when name is empty or already
// the host name it does nothing; otherwise it re-executes the process in a
// new UTS namespace (which needs CAP_SYS_ADMIN) with name as its host name,
// and does not return. When that cannot be done it logs a warning naming
// the host name BGP peers will see instead, and returns.
func Adopt(name string, logger *slog.Logger) {
	if name == "" {
		return
	}
	current, _ := os.Hostname()
	if current == name {
		return
	}
	err := reexec(name)
	logger.Warn("BGP peers will see the OS host name, not the node name: no UTS namespace of its own (CAP_SYS_ADMIN?)",
		"hostname", current, "wanted", name, "error", err)
}

// reexec re-executes the binary in a new UTS namespace whose host name is
// name. It returns only on failure.
func reexec(name string) error {
	if len(name) > 64 {
		return ErrTooLong
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("hostname: own executable: %w", err)
	}
	failed := make(chan error, 1)
	go func() {
		// This thread may end up in another namespace: it stays locked
		// and the runtime ends it when this goroutine returns.
		runtime.LockOSThread()
		if err := syscall.Unshare(syscall.CLONE_NEWUTS); err != nil {
			failed <- fmt.Errorf("hostname: unshare: %w", err)
			return
		}
		if err := syscall.Sethostname([]byte(name)); err != nil {
			failed <- fmt.Errorf("hostname: sethostname: %w", err)
			return
		}
		failed <- fmt.Errorf("hostname: exec %s: %w", exe, syscall.Exec(exe, os.Args, os.Environ()))
	}()
	return <-failed
}
