package netlab

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcOptions tunes Host.Start. The zero value runs the program with the
// Lab's environment, no input and its output in the log file.
// Pass *os.File ends of os.Pipe for a conversation with the process: other
// readers and writers are copied by goroutines that outlive the process
// until the other side closes (exec.Cmd's rule).
type ProcOptions struct {
	Env    []string  // added to the current environment
	Stdin  io.Reader // nil: no input
	Stdout io.Writer // nil: the log file (stderr always goes to the log file)
}

// Proc is a process running inside a host's namespace, tracked by PID.
type Proc struct {
	Name    string // e.g. "router-bgpd"
	PID     int
	LogPath string

	cmd     *exec.Cmd
	logFile *os.File
	done    chan struct{}
	mu      sync.Mutex
	waitErr error
}

// Start runs a long-lived program inside the host's namespace. Its output
// goes to a log file named after the host and name; the Lab stops it in
// Close.
func (h *Host) Start(name string, argv []string, opts *ProcOptions) (*Proc, error) {
	if len(argv) == 0 {
		return nil, errors.New("netlab: Start without a program")
	}
	if opts == nil {
		opts = &ProcOptions{}
	}
	l := h.lab
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, errors.New("netlab: lab is closed")
	}
	logPath := h.Path(name + ".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("netlab: log file: %w", err)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.NS}, argv...)...)
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.Stdin = opts.Stdin
	cmd.Stdout = f
	if opts.Stdout != nil {
		cmd.Stdout = opts.Stdout
	}
	cmd.Stderr = f
	cmd.WaitDelay = time.Second
	// Its own process group: a signal to the test's group (Ctrl-C) does not
	// race the Lab's orderly stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("netlab: start %s in %s: %w", argv[0], h.Role, err)
	}
	p := &Proc{
		Name:    h.Role + "-" + name,
		PID:     cmd.Process.Pid,
		LogPath: logPath,
		cmd:     cmd,
		logFile: f,
		done:    make(chan struct{}),
	}
	l.mu.Lock()
	l.procs = append(l.procs, p)
	l.mu.Unlock()
	go p.wait()
	return p, nil
}

func (p *Proc) wait() {
	err := p.cmd.Wait()
	p.mu.Lock()
	p.waitErr = err
	p.mu.Unlock()
	_ = p.logFile.Close()
	close(p.done)
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Signal sends sig to the process (by PID).
func (p *Proc) Signal(sig syscall.Signal) error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	if err := syscall.Kill(p.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("netlab: signal %s to %s (%d): %w", sig, p.Name, p.PID, err)
	}
	return nil
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM, waits up to grace for the exit, then SIGKILL. It
// reports whether the process exited within grace.
func (p *Proc) Stop(grace time.Duration) bool {
	_ = p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		p.Kill()
		return false
	}
}

// Tail returns the last n lines of the process's log file.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var buf bytes.Buffer
	for _, l := range lines {
		buf.WriteString(l)
		buf.WriteByte('\n')
	}
	return buf.String()
}
