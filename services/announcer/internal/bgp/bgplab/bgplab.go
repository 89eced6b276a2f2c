// Package bgplab runs a bgp.Speaker inside a netlab host namespace and
// drives it from outside: the helper-process pattern that netlab's package
// doc explains. It is test support: the bgp package's tests, and benchmark
// programs, import it; production code never does.
//
// The controlling process calls Start, which re-executes the current binary
// inside the host's namespace with BEACON_BGPLAB_CHILD set. That binary must
// hand control to ChildMain when IsChild reports true (a test package's
// TestMain, or a benchmark program's main, does this first thing). The child
// runs the Speaker and answers one JSON request per line on its standard
// input (apply, sessions, learned, stop) on its standard output; it logs to
// its standard error, which lands in the Lab's log file for the process.
package bgplab

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
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/beaconlb/beacon/services/announcer/internal/bgp"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

const envChild = "BEACON_BGPLAB_CHILD"

// ChildOptions configure the Speaker in the child.
type ChildOptions struct {
	RouterID         netip.Addr
	KeepRoutesOnExit bool
	// GoBGPDebug lets GoBGP's info and debug records through to the log.
	GoBGPDebug bool
}

type request struct {
	Op     string           `json:"op"`
	Peers  []bgp.PeerConfig `json:"peers,omitempty"`
	Routes []bgp.Route      `json:"routes,omitempty"`
}

type response struct {
	Err      string             `json:"err,omitempty"`
	Sessions []bgp.SessionState `json:"sessions,omitempty"`
	N        int                `json:"n,omitempty"`
}

// IsChild reports whether this process is a speaker child started by Start.
func IsChild() bool { return os.Getenv(envChild) != "" }

// ChildMain runs the speaker child until it is told to stop, its input
// closes or it gets SIGTERM, and returns the process's exit code.
func ChildMain() int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var opts ChildOptions
	if err := json.Unmarshal([]byte(os.Getenv(envChild)), &opts); err != nil {
		logger.Error("bgplab child: bad options", "err", err)
		return 2
	}
	bo := bgp.Options{RouterID: opts.RouterID, KeepRoutesOnExit: opts.KeepRoutesOnExit, PollInterval: 50 * time.Millisecond}
	if opts.GoBGPDebug {
		bo.GoBGPLogLevel = slog.LevelDebug
	}
	sp := bgp.New(logger, bo)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	runDone := make(chan error, 1)
	go func() { runDone <- sp.Run(ctx) }()

	reqs := make(chan request)
	go func() {
		defer close(reqs)
		dec := json.NewDecoder(os.Stdin)
		for {
			var r request
			if err := dec.Decode(&r); err != nil {
				return
			}
			reqs <- r
		}
	}()
	enc := json.NewEncoder(os.Stdout)
	reply := func(r response) {
		if err := enc.Encode(r); err != nil {
			logger.Error("bgplab child: reply", "err", err)
		}
	}
	for {
		select {
		case err := <-runDone:
			logger.Info("bgplab child: Run returned", "err", err)
			if err != nil {
				return 1
			}
			return 0
		case r, ok := <-reqs:
			if !ok {
				logger.Info("bgplab child: input closed, stopping")
				stop()
				if err := <-runDone; err != nil {
					logger.Error("bgplab child: Run", "err", err)
					return 1
				}
				return 0
			}
			switch r.Op {
			case "apply":
				reply(response{Err: errString(sp.Apply(ctx, r.Peers, r.Routes))})
			case "sessions":
				reply(response{Sessions: sp.Sessions()})
			case "learned":
				n, err := sp.Learned(ctx)
				reply(response{N: n, Err: errString(err)})
			case "stop":
				stop()
				err := <-runDone
				reply(response{Err: errString(err)})
				return 0
			default:
				reply(response{Err: "unknown op " + r.Op})
			}
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Speaker is a bgp.Speaker running in a child process inside a namespace.
type Speaker struct {
	Proc *netlab.Proc

	mu  sync.Mutex
	in  io.WriteCloser
	out *bufio.Reader
}

// Start runs a speaker child inside host's namespace.
func Start(host *netlab.Host, opts ChildOptions) (*Speaker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bgplab: own executable: %w", err)
	}
	b, err := json.Marshal(opts)
	if err != nil {
		return nil, fmt.Errorf("bgplab: options: %w", err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("bgplab: pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		_ = inR.Close()
		_ = inW.Close()
		return nil, fmt.Errorf("bgplab: pipe: %w", err)
	}
	p, err := host.Start("speaker", []string{exe}, &netlab.ProcOptions{
		// Under -race a process sleeps a second at exit by default.
		Env:    []string{envChild + "=" + string(b), "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")},
		Stdin:  inR,
		Stdout: outW,
	})
	// The child has its own copies of its ends now.
	_ = inR.Close()
	_ = outW.Close()
	if err != nil {
		_ = inW.Close()
		_ = outR.Close()
		return nil, err
	}
	go func() {
		// outR is left to reach EOF by itself: the last reply may still
		// be in the pipe when the child exits.
		<-p.Done()
		_ = inW.Close()
	}()
	return &Speaker{Proc: p, in: inW, out: bufio.NewReader(outR)}, nil
}

func (s *Speaker) call(ctx context.Context, r request) (response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := json.Marshal(r)
	if err != nil {
		return response{}, fmt.Errorf("bgplab: %w", err)
	}
	type result struct {
		resp response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		if _, err := s.in.Write(append(b, '\n')); err != nil {
			done <- result{err: fmt.Errorf("bgplab: send %s: %w", r.Op, err)}
			return
		}
		line, err := s.out.ReadBytes('\n')
		if err != nil {
			done <- result{err: fmt.Errorf("bgplab: reply to %s: %w", r.Op, err)}
			return
		}
		var resp response
		if err := json.Unmarshal(line, &resp); err != nil {
			done <- result{err: fmt.Errorf("bgplab: reply to %s: %w", r.Op, err)}
			return
		}
		done <- result{resp: resp}
	}()
	select {
	case res := <-done:
		return res.resp, res.err
	case <-ctx.Done():
		// The exchange is out of step now: end the child.
		s.Proc.Kill()
		return response{}, fmt.Errorf("bgplab: %s: %w", r.Op, ctx.Err())
	}
}

// Apply calls the child's Speaker.Apply.
func (s *Speaker) Apply(ctx context.Context, peers []bgp.PeerConfig, routes []bgp.Route) error {
	resp, err := s.call(ctx, request{Op: "apply", Peers: peers, Routes: routes})
	if err != nil {
		return err
	}
	if resp.Err != "" {
		return errors.New(resp.Err)
	}
	return nil
}

// Sessions calls the child's Speaker.Sessions.
func (s *Speaker) Sessions(ctx context.Context) ([]bgp.SessionState, error) {
	resp, err := s.call(ctx, request{Op: "sessions"})
	return resp.Sessions, err
}

// Learned calls the child's Speaker.Learned.
func (s *Speaker) Learned(ctx context.Context) (int, error) {
	resp, err := s.call(ctx, request{Op: "learned"})
	if err == nil && resp.Err != "" {
		err = errors.New(resp.Err)
	}
	return resp.N, err
}

// Stop cancels the child's Run, waits for it and for the process to exit,
// and returns Run's error.
func (s *Speaker) Stop(ctx context.Context) error {
	resp, err := s.call(ctx, request{Op: "stop"})
	if err != nil {
		return err
	}
	select {
	case <-s.Proc.Done():
	case <-ctx.Done():
		return fmt.Errorf("bgplab: speaker did not exit: %w", ctx.Err())
	}
	if resp.Err != "" {
		return errors.New(resp.Err)
	}
	return nil
}

// Kill ends the child with SIGKILL: no withdrawal, no NOTIFICATION.
func (s *Speaker) Kill() { s.Proc.Kill() }

// Session returns the named peer's session state.
func (s *Speaker) Session(ctx context.Context, peer string) (bgp.SessionState, error) {
	all, err := s.Sessions(ctx)
	if err != nil {
		return bgp.SessionState{}, err
	}
	i := slices.IndexFunc(all, func(x bgp.SessionState) bool { return x.Peer == peer })
	if i < 0 {
		return bgp.SessionState{}, fmt.Errorf("bgplab: no session for %q", peer)
	}
	return all[i], nil
}

// WaitEstablished polls until every named session is established (and, with
// bfd, its BFD is up).
func (s *Speaker) WaitEstablished(ctx context.Context, timeout time.Duration, bfd bool, peers ...string) error {
	return netlab.Eventually(ctx, timeout, 50*time.Millisecond, func(ctx context.Context) error {
		for _, p := range peers {
			st, err := s.Session(ctx, p)
			if err != nil {
				return err
			}
			if st.State != bgp.StateEstablished {
				return fmt.Errorf("session %s is %s", p, st.State)
			}
			if bfd && !st.BFDUp {
				return fmt.Errorf("session %s: BFD is not up", p)
			}
		}
		return nil
	})
}
