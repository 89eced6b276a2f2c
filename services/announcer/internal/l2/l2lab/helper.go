package l2lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/beaconlb/beacon/services/announcer/internal/l2"
)

// helperEnv marks a process started by StartResponder.
const helperEnv = "L2LAB_RESPONDER_HELPER"

// probeEnv makes the helper probe new addresses (l2.DefaultProbe with a
// short Retry), for StartProbingResponder.
const probeEnv = "L2LAB_RESPONDER_PROBE"

// RunHelperIfAsked turns this process into a responder helper, and exits,
// when StartResponder started it; otherwise it returns at once. Call it
// first thing in TestMain.
//
// The helper runs an l2.Responder in its own namespace and speaks a line
// protocol on stdin/stdout: "set JSON" (interface to addresses) answers "ok"
// once Set has returned, or "err TEXT"; "stats" answers "stats JSON";
// "known JSON" (addresses) calls SetKnown and answers "ok"; "conflicts"
// answers "conflicts JSON"; "stop" cancels Run and answers "stopped" once
// Run has returned. It logs to stderr and stops when stdin closes.
func RunHelperIfAsked() {
	if os.Getenv(helperEnv) == "" {
		return
	}
	os.Exit(helperMain(os.Stdin, os.Stdout, os.Stderr))
}

func helperMain(in io.Reader, out, logw io.Writer) int {
	logger := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := l2.Options{}
	if os.Getenv(probeEnv) != "" {
		opts.Probe = l2.DefaultProbe()
		opts.Probe.Retry = time.Second
	}
	r := l2.New(logger, opts)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()
	stop := func() int {
		cancel()
		if err := <-runErr; err != nil {
			logger.Error("Run failed", "err", err)
			return 1
		}
		return 0
	}

	fmt.Fprintln(out, "ready")
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		verb, arg, _ := strings.Cut(sc.Text(), " ")
		switch verb {
		case "set":
			var desired map[string][]netip.Addr
			if err := json.Unmarshal([]byte(arg), &desired); err != nil {
				fmt.Fprintf(out, "err %v\n", err)
				continue
			}
			if err := r.Set(desired); err != nil {
				fmt.Fprintf(out, "err %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
				continue
			}
			fmt.Fprintln(out, "ok")
		case "known":
			var known []netip.Addr
			if err := json.Unmarshal([]byte(arg), &known); err != nil {
				fmt.Fprintf(out, "err %v\n", err)
				continue
			}
			r.SetKnown(known)
			fmt.Fprintln(out, "ok")
		case "conflicts":
			b, err := json.Marshal(r.Conflicts())
			if err != nil {
				fmt.Fprintf(out, "err %v\n", err)
				continue
			}
			fmt.Fprintf(out, "conflicts %s\n", b)
		case "stats":
			b, err := json.Marshal(r.Stats())
			if err != nil {
				fmt.Fprintf(out, "err %v\n", err)
				continue
			}
			fmt.Fprintf(out, "stats %s\n", b)
		case "stop":
			code := stop()
			fmt.Fprintln(out, "stopped")
			return code
		default:
			fmt.Fprintf(out, "err unknown command %q\n", verb)
		}
	}
	return stop() // the test went away
}

// Responder is a responder helper process running in a node namespace.
type Responder struct {
	NS  string
	PID int

	lab   *Lab
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string   // stdout, closed at EOF
	exit  chan struct{} // closed once the process has been waited for and its output drained
	err   error         // the process's exit status, set before exit is closed

	mu     sync.Mutex // one command at a time
	killMu sync.Mutex
	killed bool
}

// StartResponder starts a responder helper in namespace ns, answering for
// nothing until Set. The helper is SIGKILLed (by PID) in t.Cleanup if still
// running.
func (l *Lab) StartResponder(ns string) (*Responder, error) {
	return l.startResponder(ns, false)
}

// StartProbingResponder is StartResponder with conflict detection on: new
// addresses are probed before they are answered (l2.DefaultProbe, with a
// new round every second while another host has them).
func (l *Lab) StartProbingResponder(ns string) (*Responder, error) {
	return l.startResponder(ns, true)
}

func (l *Lab) startResponder(ns string, probe bool) (*Responder, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	// -test.run=^$: should the helper switch ever be missed, run no tests.
	cmd := exec.Command("ip", "netns", "exec", ns, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	if probe {
		cmd.Env = append(cmd.Env, probeEnv+"=1")
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("helper stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("helper stdout: %w", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("helper stderr: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start helper in %s: %w", ns, err)
	}
	// ip netns exec execs the program: this PID is the responder's.
	h := &Responder{
		NS: ns, PID: cmd.Process.Pid, lab: l, cmd: cmd, stdin: stdin,
		lines: make(chan string, 16), exit: make(chan struct{}),
	}
	role := ns[strings.LastIndex(ns, "-")+1:]
	var pipes sync.WaitGroup
	pipes.Go(func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			l.t.Logf("[%s responder pid %d] %s", role, h.PID, sc.Text())
		}
	})
	pipes.Go(func() {
		defer close(h.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
	})
	go func() {
		pipes.Wait() // cmd.Wait closes the pipes: read them to the end first
		h.err = cmd.Wait()
		close(h.exit)
	}()
	l.t.Cleanup(h.Kill)

	if line, err := h.read(30 * time.Second); err != nil || line != "ready" {
		h.Kill()
		if err == nil {
			err = fmt.Errorf("said %q", line)
		}
		return nil, fmt.Errorf("helper in %s did not start: %w", ns, err)
	}
	return h, nil
}

func (h *Responder) read(timeout time.Duration) (string, error) {
	select {
	case line, ok := <-h.lines:
		if !ok {
			<-h.exit
			if h.err != nil {
				return "", fmt.Errorf("helper pid %d exited: %w", h.PID, h.err)
			}
			return "", fmt.Errorf("helper pid %d exited", h.PID)
		}
		return line, nil
	case <-time.After(timeout):
		return "", fmt.Errorf("helper pid %d: no answer in %v", h.PID, timeout)
	}
}

func (h *Responder) call(cmd string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := io.WriteString(h.stdin, cmd+"\n"); err != nil {
		return "", fmt.Errorf("helper pid %d: %w", h.PID, err)
	}
	line, err := h.read(10 * time.Second)
	if err != nil {
		return "", err
	}
	if rest, ok := strings.CutPrefix(line, "err "); ok {
		return "", errors.New(rest)
	}
	return line, nil
}

// Set calls the helper's Responder.Set and returns once it has returned.
func (h *Responder) Set(desired map[string][]netip.Addr) error {
	b, err := json.Marshal(desired)
	if err != nil {
		return fmt.Errorf("encode desired: %w", err)
	}
	line, err := h.call("set " + string(b))
	if err != nil {
		return err
	}
	if line != "ok" {
		return fmt.Errorf("helper pid %d: unexpected answer %q", h.PID, line)
	}
	return nil
}

// SetKnown calls the helper's Responder.SetKnown.
func (h *Responder) SetKnown(known []netip.Addr) error {
	b, err := json.Marshal(known)
	if err != nil {
		return fmt.Errorf("encode known: %w", err)
	}
	line, err := h.call("known " + string(b))
	if err != nil {
		return err
	}
	if line != "ok" {
		return fmt.Errorf("helper pid %d: unexpected answer %q", h.PID, line)
	}
	return nil
}

// Conflicts returns the helper's Responder.Conflicts.
func (h *Responder) Conflicts() ([]l2.Conflict, error) {
	line, err := h.call("conflicts")
	if err != nil {
		return nil, err
	}
	rest, ok := strings.CutPrefix(line, "conflicts ")
	if !ok {
		return nil, fmt.Errorf("helper pid %d: unexpected answer %q", h.PID, line)
	}
	var cs []l2.Conflict
	if err := json.Unmarshal([]byte(rest), &cs); err != nil {
		return nil, fmt.Errorf("decode conflicts: %w", err)
	}
	return cs, nil
}

// Stats returns the helper's Responder.Stats.
func (h *Responder) Stats() (l2.Stats, error) {
	line, err := h.call("stats")
	if err != nil {
		return l2.Stats{}, err
	}
	var s l2.Stats
	rest, ok := strings.CutPrefix(line, "stats ")
	if !ok {
		return s, fmt.Errorf("helper pid %d: unexpected answer %q", h.PID, line)
	}
	if err := json.Unmarshal([]byte(rest), &s); err != nil {
		return s, fmt.Errorf("decode stats: %w", err)
	}
	return s, nil
}

// Stop cancels the helper's Run, waits for it to return and the process to
// exit, and reports a non-zero exit (a data race found in the helper, say).
func (h *Responder) Stop() error {
	line, err := h.call("stop")
	if err != nil {
		return err
	}
	if line != "stopped" {
		return fmt.Errorf("helper pid %d: unexpected answer %q", h.PID, line)
	}
	_ = h.stdin.Close()
	select {
	case <-h.exit:
	case <-time.After(10 * time.Second):
		h.Kill()
		return fmt.Errorf("helper pid %d did not exit after stop", h.PID)
	}
	if h.err != nil {
		return fmt.Errorf("helper pid %d: %w", h.PID, h.err)
	}
	return nil
}

// Kill SIGKILLs the helper, like an announcer that crashes, and waits for
// it to be gone. Killing a helper that already exited does nothing.
func (h *Responder) Kill() {
	h.killMu.Lock()
	if !h.killed {
		h.killed = true
		select {
		case <-h.exit:
		default:
			_ = h.cmd.Process.Kill() // os.Process signals its own PID only
		}
	}
	h.killMu.Unlock()
	<-h.exit
}
