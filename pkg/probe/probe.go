// Package probe owns the operational HTTP endpoint every Beacon binary
// serves next to its gRPC API:
//
//   - /metrics: Prometheus text, from the handler the binary passes in
//     (normally telemetry.Telemetry.MetricsHandler);
//   - /healthz: liveness, 200 "ok" for as long as the process serves HTTP;
//   - /readyz: readiness, 200 when every registered Check passes, else 503
//     with one "name: reason" line per failing check.
//
// It owns nothing else: the checks themselves belong to the components they
// describe.
package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// CheckTimeout bounds each readiness check. A check that has not
	// returned by then counts as failing.
	CheckTimeout = 2 * time.Second
	// ShutdownTimeout is how long Run waits for in-flight requests once its
	// context is done.
	ShutdownTimeout = 5 * time.Second
	// RetryMin and RetryMax bound ListenRetrying's wait between attempts:
	// the first wait is RetryMin, each next one twice the last, up to
	// RetryMax.
	RetryMin = 100 * time.Millisecond
	RetryMax = 5 * time.Second
)

// Check reports whether one component is ready to take traffic: nil means
// ready. It must return promptly once ctx is done.
type Check func(ctx context.Context) error

// Server is the probe HTTP server. Create it with New, register checks with
// AddReadiness, then call Run (optionally after Listen). A Server runs once.
type Server struct {
	addr    string
	logger  *slog.Logger
	handler http.Handler

	mu      sync.Mutex
	checks  map[string]Check
	ln      net.Listener // set by Listen
	started bool         // Run has been called
	ready   *bool        // last readiness reported, nil before the first /readyz
}

// New returns a Server that will listen on addr (":0" and "127.0.0.1:0"
// pick a free port; see Listen and Addr). metrics serves /metrics; if it is
// nil the path is not served. A nil logger discards logs. New starts
// nothing.
func New(addr string, metrics http.Handler, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		addr:   addr,
		logger: logger,
		checks: make(map[string]Check),
	}
	mux := http.NewServeMux()
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	s.handler = mux
	return s
}

// AddReadiness registers c under name; /readyz runs every registered check
// on each request. It may be called at any time, concurrently with serving.
// It panics if name is empty or already registered, or c is nil: those are
// wiring mistakes.
func (s *Server) AddReadiness(name string, c Check) {
	if name == "" || c == nil {
		panic("probe: AddReadiness needs a name and a non-nil check")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.checks[name]; dup {
		panic(fmt.Sprintf("probe: readiness check %q registered twice", name))
	}
	s.checks[name] = c
}

// Listen binds the server's address without serving yet, so that a caller
// can learn the port (Addr) before starting Run. Calling it is optional: Run
// listens itself if Listen was not called. Once Listen succeeds, Run must be
// called to release the listener.
func (s *Server) Listen(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil || s.started {
		return errors.New("probe: already listening")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.addr)
	if err != nil {
		return fmt.Errorf("probe: listen on %q: %w", s.addr, err)
	}
	s.ln = ln
	return nil
}

// ListenRetrying is Listen for an address that may still be held by
// another process, typically the previous instance of the same binary that
// a supervisor has just restarted and that is still shutting down: while
// the address is in use (EADDRINUSE) it logs a warning and tries again,
// after RetryMin, then twice as long each time up to RetryMax, until the
// address is free or ctx is done. Any other error is returned at once.
// When ctx ends first it returns an error wrapping ctx.Err(), and Run need
// not be called; once it returns nil, Run must be called, as after Listen.
func (s *Server) ListenRetrying(ctx context.Context) error {
	wait := RetryMin
	for attempt := 1; ; attempt++ {
		err := s.Listen(ctx)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("probe: %s still in use when giving up: %w", s.addr, ctx.Err())
		}
		s.logger.WarnContext(ctx, "probe address in use, retrying", "addr", s.addr, "attempt", attempt, "retry_in", wait.String())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("probe: %s still in use when giving up: %w", s.addr, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, RetryMax)
	}
}

// Addr returns the bound address once Listen (or Run) has bound it, and nil
// before. It does not block.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Run serves until ctx is done, then shuts down gracefully, giving in-flight
// requests up to ShutdownTimeout. It listens first unless Listen already
// did. It returns nil after a clean shutdown (or if ctx is done before it
// starts), and an error if it cannot listen or serve, or if requests were
// still in flight when the shutdown timeout expired.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("probe: Run called twice")
	}
	s.started = true
	ln := s.ln
	s.mu.Unlock()

	if ctx.Err() != nil {
		if ln != nil {
			_ = ln.Close()
		}
		return nil
	}
	if ln == nil {
		var lc net.ListenConfig
		var err error
		ln, err = lc.Listen(ctx, "tcp", s.addr)
		if err != nil {
			if ctx.Err() != nil {
				return nil // cancelled while binding: nothing was served
			}
			return fmt.Errorf("probe: listen on %q: %w", s.addr, err)
		}
		s.mu.Lock()
		s.ln = ln
		s.mu.Unlock()
	}

	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	s.logger.InfoContext(ctx, "probe server listening", "addr", ln.Addr().String())

	select {
	case err := <-served:
		return fmt.Errorf("probe: serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("probe: shut down server on %s: %w", ln.Addr(), err)
	}
	s.logger.InfoContext(ctx, "probe server stopped", "addr", ln.Addr().String())
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeText(w, http.StatusOK, "ok\n")
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	failures := s.runChecks(r.Context())
	s.noteReadiness(r.Context(), failures)
	if len(failures) == 0 {
		writeText(w, http.StatusOK, "ok\n")
		return
	}
	var b strings.Builder
	b.WriteString("not ready\n")
	for _, f := range failures {
		fmt.Fprintf(&b, "%s: %s\n", f.name, oneLine(f.err.Error()))
	}
	writeText(w, http.StatusServiceUnavailable, b.String())
}

type failure struct {
	name string
	err  error
}

// runChecks runs every registered check concurrently, each with a context
// derived from ctx that expires after CheckTimeout, and returns the failing
// ones sorted by name. A check still running at the timeout counts as failed
// and is left to finish on its own.
func (s *Server) runChecks(ctx context.Context) []failure {
	s.mu.Lock()
	checks := make(map[string]Check, len(s.checks))
	for name, c := range s.checks {
		checks[name] = c
	}
	s.mu.Unlock()
	if len(checks) == 0 {
		return nil
	}

	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	results := make(chan failure, len(checks)) // buffered: late checks never block
	for name, c := range checks {
		go func() {
			results <- failure{name: name, err: runCheck(ctx, c)}
		}()
	}

	var failures []failure
	pending := len(checks)
	for pending > 0 {
		select {
		case f := <-results:
			delete(checks, f.name)
			pending--
			if f.err != nil {
				failures = append(failures, f)
			}
		case <-ctx.Done():
			for name := range checks {
				failures = append(failures, failure{name: name, err: fmt.Errorf("check did not return: %w", ctx.Err())})
			}
			pending = 0
		}
	}
	slices.SortFunc(failures, func(a, b failure) int { return strings.Compare(a.name, b.name) })
	return failures
}

func runCheck(ctx context.Context, c Check) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("check panicked: %v", p)
		}
	}()
	return c(ctx)
}

// noteReadiness logs when readiness changes, so that the log shows why a
// binary went out of (or back into) rotation without a line per probe.
func (s *Server) noteReadiness(ctx context.Context, failures []failure) {
	ready := len(failures) == 0
	s.mu.Lock()
	changed := s.ready == nil || *s.ready != ready
	s.ready = &ready
	s.mu.Unlock()
	if !changed {
		return
	}
	if ready {
		s.logger.InfoContext(ctx, "readiness changed", "ready", true)
		return
	}
	reasons := make([]any, 0, len(failures))
	for _, f := range failures {
		reasons = append(reasons, slog.String(f.name, f.err.Error()))
	}
	s.logger.InfoContext(ctx, "readiness changed", "ready", false, slog.Group("failing", reasons...))
}

func writeText(w http.ResponseWriter, code int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
