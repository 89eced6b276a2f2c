// Package testwait is how tests wait for something to happen: they poll a
// condition at a short interval up to a deadline, instead of sleeping a
// fixed time and hoping it has happened. Deadlines are generous (the
// machines running the tests may be loaded); the wait ends as soon as the
// condition holds.
//
// Only tests import this package.
package testwait

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Interval is how often a condition is checked.
const Interval = 10 * time.Millisecond

// ErrNotYet is what a condition of Until returns while it does not hold.
var ErrNotYet = errors.New("not yet")

// Poll calls check every Interval until it returns nil, ctx ends, or
// timeout passes. It returns nil once check did, else check's last error
// (wrapped with how long it waited).
func Poll(ctx context.Context, timeout time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("after %s: %w", timeout, err)
		}
	}
}

// For waits (Poll) until check returns nil and fails t, naming what it
// waited for and check's last error, if it does not within timeout. Call
// it from the test's goroutine.
func For(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	if err := Poll(t.Context(), timeout, check); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// Until is For with a condition that holds or not.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	For(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return ErrNotYet
	})
}
