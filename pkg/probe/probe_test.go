package probe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/metric"

	"github.com/beaconlb/beacon/pkg/probe"
	"github.com/beaconlb/beacon/pkg/telemetry"
	"github.com/beaconlb/beacon/pkg/testwait"
)

// startServer listens on 127.0.0.1:0, runs s until the test ends, and
// returns the base URL. The cleanup checks that Run returns nil.
func startServer(t *testing.T, s *probe.Server) string {
	t.Helper()
	if err := s.Listen(t.Context()); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return "http://" + s.Addr().String()
}

type response struct {
	Code int
	Body string
}

func get(t *testing.T, method, url string) response {
	t.Helper()
	r, err := fetch(t.Context(), method, url)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fetch is get for goroutines other than the test's.
func fetch(ctx context.Context, method, url string) (response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return response{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("read %s: %w", url, err)
	}
	return response{Code: resp.StatusCode, Body: string(body)}, nil
}

func TestEndpoints(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "fake_metric 1\n")
	})
	tests := []struct {
		name   string
		checks map[string]probe.Check
		noMet  bool
		method string
		path   string
		want   response
	}{
		{name: "healthz", path: "/healthz", want: response{200, "ok\n"}},
		{name: "healthz ignores failing readiness", path: "/healthz",
			checks: map[string]probe.Check{"db": fail("down")},
			want:   response{200, "ok\n"}},
		{name: "healthz HEAD", method: http.MethodHead, path: "/healthz", want: response{200, ""}},
		{name: "healthz POST", method: http.MethodPost, path: "/healthz", want: response{405, "Method Not Allowed\n"}},
		{name: "readyz without checks", path: "/readyz", want: response{200, "ok\n"}},
		{name: "readyz all passing", path: "/readyz",
			checks: map[string]probe.Check{"db": pass, "leader": pass},
			want:   response{200, "ok\n"}},
		{name: "readyz one failing", path: "/readyz",
			checks: map[string]probe.Check{"db": pass, "etcd": fail("no quorum")},
			want:   response{503, "not ready\netcd: no quorum\n"}},
		{name: "readyz failures sorted, reasons on one line", path: "/readyz",
			checks: map[string]probe.Check{"zeta": fail("z\nmore"), "alpha": fail("a"), "mid": pass},
			want:   response{503, "not ready\nalpha: a\nzeta: z more\n"}},
		{name: "readyz panicking check", path: "/readyz",
			checks: map[string]probe.Check{"boom": func(context.Context) error { panic("oops") }},
			want:   response{503, "not ready\nboom: check panicked: oops\n"}},
		{name: "metrics", path: "/metrics", want: response{200, "fake_metric 1\n"}},
		{name: "metrics absent", path: "/metrics", noMet: true, want: response{404, "404 page not found\n"}},
		{name: "unknown path", path: "/debug/pprof/", want: response{404, "404 page not found\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m http.Handler = metrics
			if tt.noMet {
				m = nil
			}
			s := probe.New("127.0.0.1:0", m, nil)
			for name, c := range tt.checks {
				s.AddReadiness(name, c)
			}
			base := startServer(t, s)
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			if diff := cmp.Diff(tt.want, get(t, method, base+tt.path)); diff != "" {
				t.Errorf("%s %s (-want +got):\n%s", method, tt.path, diff)
			}
		})
	}
}

func pass(context.Context) error { return nil }

func fail(reason string) probe.Check {
	return func(context.Context) error { return errors.New(reason) }
}

func TestReadinessFollowsChecks(t *testing.T) {
	var mu sync.Mutex
	state := errors.New("warming up")
	s := probe.New("127.0.0.1:0", nil, nil)
	s.AddReadiness("cache", func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return state
	})
	base := startServer(t, s)

	if got := get(t, http.MethodGet, base+"/readyz"); got.Code != 503 || !strings.Contains(got.Body, "cache: warming up") {
		t.Errorf("before ready: %+v", got)
	}
	mu.Lock()
	state = nil
	mu.Unlock()
	if got := get(t, http.MethodGet, base+"/readyz"); got.Code != 200 {
		t.Errorf("after ready: %+v", got)
	}
	// Checks added while serving are picked up.
	s.AddReadiness("late", fail("not yet"))
	if diff := cmp.Diff(response{503, "not ready\nlate: not yet\n"}, get(t, http.MethodGet, base+"/readyz")); diff != "" {
		t.Errorf("after late check (-want +got):\n%s", diff)
	}
}

func TestCheckTimeout(t *testing.T) {
	deadlines := make(chan time.Duration, 1)
	s := probe.New("127.0.0.1:0", nil, nil)
	s.AddReadiness("deadline", func(ctx context.Context) error {
		d, ok := ctx.Deadline()
		if !ok {
			return errors.New("no deadline")
		}
		deadlines <- time.Until(d)
		return nil
	})
	release := make(chan struct{})
	defer close(release)
	s.AddReadiness("stuck", func(context.Context) error {
		<-release // ignores its context
		return nil
	})
	base := startServer(t, s)

	start := time.Now()
	got := get(t, http.MethodGet, base+"/readyz")
	took := time.Since(start)
	want := response{503, "not ready\nstuck: check did not return: context deadline exceeded\n"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/readyz (-want +got):\n%s", diff)
	}
	if took < probe.CheckTimeout || took > probe.CheckTimeout+2*time.Second {
		t.Errorf("/readyz took %v, want about %v", took, probe.CheckTimeout)
	}
	if d := <-deadlines; d <= 0 || d > probe.CheckTimeout {
		t.Errorf("check deadline %v from now, want within (0, %v]", d, probe.CheckTimeout)
	}
}

func TestMetricsFromMeterProvider(t *testing.T) {
	tel, err := telemetry.New(t.Context(), telemetry.Config{ServiceName: "probe-test"})
	if err != nil {
		t.Fatalf("telemetry.New: %v", err)
	}
	t.Cleanup(func() {
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	counter, err := tel.MeterProvider.Meter("beacon/probe_test").Int64Counter("beacon_test_allocations",
		metric.WithDescription("Allocations made in the test."))
	if err != nil {
		t.Fatalf("Int64Counter: %v", err)
	}
	counter.Add(t.Context(), 3)

	base := startServer(t, probe.New("127.0.0.1:0", tel.MetricsHandler(), nil))
	got := get(t, http.MethodGet, base+"/metrics")
	if got.Code != 200 {
		t.Fatalf("GET /metrics = %d:\n%s", got.Code, got.Body)
	}
	for _, re := range []string{
		`(?m)^# TYPE beacon_test_allocations_total counter$`,
		`(?m)^beacon_test_allocations_total\{[^}]*otel_scope_name="beacon/probe_test"[^}]*\} 3$`,
		`(?m)^go_goroutines \d+$`,
	} {
		if !regexp.MustCompile(re).MatchString(got.Body) {
			t.Errorf("/metrics does not match %s; got:\n%s", re, got.Body)
		}
	}
}

func TestRun(t *testing.T) {
	t.Run("listens itself and returns nil on cancel", func(t *testing.T) {
		s := probe.New("127.0.0.1:0", nil, nil)
		if s.Addr() != nil {
			t.Fatalf("Addr before listening = %v, want nil", s.Addr())
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		testwait.Until(t, 30*time.Second, "Run to bind an address", func() bool { return s.Addr() != nil })
		if got := get(t, http.MethodGet, "http://"+s.Addr().String()+"/healthz"); got.Code != 200 {
			t.Errorf("/healthz = %+v", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
		if _, err := net.DialTimeout("tcp", s.Addr().String(), time.Second); err == nil {
			t.Errorf("still accepting connections after Run returned")
		}
	})

	t.Run("in-flight request finishes during shutdown", func(t *testing.T) {
		s := probe.New("127.0.0.1:0", nil, nil)
		entered, release := make(chan struct{}), make(chan struct{})
		s.AddReadiness("slow", func(context.Context) error {
			close(entered)
			<-release
			return nil
		})
		if err := s.Listen(t.Context()); err != nil {
			t.Fatalf("Listen: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()

		type result struct {
			r   response
			err error
		}
		got := make(chan result, 1)
		go func() {
			r, err := fetch(t.Context(), http.MethodGet, "http://"+s.Addr().String()+"/readyz")
			got <- result{r, err}
		}()
		<-entered
		cancel()
		// Shutdown has started once the listener is closed.
		testwait.Until(t, 30*time.Second, "Shutdown to close the listener", func() bool {
			c, err := net.DialTimeout("tcp", s.Addr().String(), time.Second)
			if err != nil {
				return true
			}
			_ = c.Close()
			return false
		})
		close(release)
		res := <-got
		if res.err != nil {
			t.Fatalf("in-flight /readyz: %v", res.err)
		}
		if diff := cmp.Diff(response{200, "ok\n"}, res.r); diff != "" {
			t.Errorf("in-flight /readyz (-want +got):\n%s", diff)
		}
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	})

	t.Run("cancelled before start", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := probe.New("127.0.0.1:0", nil, nil).Run(ctx); err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	})

	t.Run("address in use", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		s := probe.New(ln.Addr().String(), nil, nil)
		if err := s.Run(t.Context()); err == nil {
			t.Errorf("Run on a used address succeeded")
		}
	})

	t.Run("twice", func(t *testing.T) {
		s := probe.New("127.0.0.1:0", nil, nil)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := s.Run(ctx); err != nil {
			t.Fatalf("first Run = %v", err)
		}
		if err := s.Run(t.Context()); err == nil {
			t.Errorf("second Run succeeded")
		}
		if err := s.Listen(t.Context()); err == nil {
			t.Errorf("Listen after Run succeeded")
		}
	})
}

func TestAddReadinessPanics(t *testing.T) {
	tests := []struct {
		name      string
		checkName string
		check     probe.Check
	}{
		{name: "empty name", checkName: "", check: pass},
		{name: "nil check", checkName: "db", check: nil},
		{name: "duplicate", checkName: "dup", check: pass},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := probe.New("127.0.0.1:0", nil, nil)
			s.AddReadiness("dup", pass)
			defer func() {
				if recover() == nil {
					t.Errorf("AddReadiness(%q) did not panic", tt.checkName)
				}
			}()
			s.AddReadiness(tt.checkName, tt.check)
		})
	}
}
