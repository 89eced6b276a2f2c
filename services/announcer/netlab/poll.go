package netlab

import (
	"context"
	"fmt"
	"time"
)

// Eventually calls cond every interval until it returns nil, ctx is done or
// timeout has passed. On failure the error wraps cond's last error, so a
// test's message says what was still wrong.
func Eventually(ctx context.Context, timeout, interval time.Duration, cond func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	start := time.Now()
	for {
		err := cond(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still not so after %v: %w", time.Since(start).Round(time.Millisecond), err)
		case <-t.C:
		}
	}
}

// Consistently calls cond every interval for the whole of d and fails at the
// first error: the way to show that something does not happen (a session that
// must never come up, a route that must stay withdrawn).
func Consistently(ctx context.Context, d, interval time.Duration, cond func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	start := time.Now()
	for {
		if err := cond(ctx); err != nil {
			if ctx.Err() != nil {
				return nil // the window ended during the check
			}
			return fmt.Errorf("after %v: %w", time.Since(start).Round(time.Millisecond), err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
