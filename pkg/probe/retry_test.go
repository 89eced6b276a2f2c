package probe_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/beaconlb/beacon/pkg/probe"
)

// messages is a slog handler that sends each record's message on a channel
// (dropping it when nobody is reading and the buffer is full).
type messages chan string

func (m messages) Enabled(context.Context, slog.Level) bool { return true }
func (m messages) Handle(_ context.Context, r slog.Record) error {
	select {
	case m <- r.Message:
	default:
	}
	return nil
}
func (m messages) WithAttrs([]slog.Attr) slog.Handler { return m }
func (m messages) WithGroup(string) slog.Handler      { return m }

// waitMessage waits until msg is logged.
func waitMessage(t *testing.T, m messages, msg string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-m:
			if got == msg {
				return
			}
		case <-timeout:
			t.Fatalf("%q not logged within 10s", msg)
		}
	}
}

func TestListenRetrying(t *testing.T) {
	t.Run("serves once the address is free", func(t *testing.T) {
		// Another process (here: a plain listener) still holds the port.
		holder, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := holder.Addr().String()
		logs := make(messages, 16)
		s := probe.New(addr, nil, slog.New(logs))
		listened := make(chan error, 1)
		go func() { listened <- s.ListenRetrying(t.Context()) }()

		// Two failed attempts, the second after a wait: it is retrying,
		// not failing.
		waitMessage(t, logs, "probe address in use, retrying")
		waitMessage(t, logs, "probe address in use, retrying")
		select {
		case err := <-listened:
			t.Fatalf("ListenRetrying returned %v while the address was taken", err)
		default:
		}
		if err := holder.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-listened:
			if err != nil {
				t.Fatalf("ListenRetrying = %v", err)
			}
		case <-time.After(probe.RetryMax + 10*time.Second):
			t.Fatal("ListenRetrying did not bind the freed address")
		}
		if got := s.Addr().String(); got != addr {
			t.Errorf("Addr = %s, want %s", got, addr)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		if got := get(t, http.MethodGet, "http://"+addr+"/healthz"); got.Code != http.StatusOK {
			t.Errorf("/healthz = %+v", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})

	t.Run("gives up when the context ends", func(t *testing.T) {
		holder, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close()
		logs := make(messages, 16)
		s := probe.New(holder.Addr().String(), nil, slog.New(logs))
		ctx, cancel := context.WithCancel(t.Context())
		listened := make(chan error, 1)
		go func() { listened <- s.ListenRetrying(ctx) }()
		waitMessage(t, logs, "probe address in use, retrying")
		cancel()
		if err := <-listened; !errors.Is(err, context.Canceled) {
			t.Errorf("ListenRetrying = %v, want context.Canceled", err)
		}
		if s.Addr() != nil {
			t.Errorf("Addr = %v after giving up, want nil", s.Addr())
		}
	})

	t.Run("other errors at once", func(t *testing.T) {
		s := probe.New("127.0.0.1:notaport", nil, nil)
		err := s.ListenRetrying(t.Context())
		if err == nil || errors.Is(err, context.Canceled) {
			t.Errorf("ListenRetrying on a bad address = %v, want an immediate error", err)
		}
	})
}
