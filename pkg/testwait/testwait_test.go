package testwait

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	var calls atomic.Int32
	err := Poll(context.Background(), time.Minute, func() error {
		if calls.Add(1) < 3 {
			return ErrNotYet
		}
		return nil
	})
	if err != nil || calls.Load() != 3 {
		t.Errorf("Poll = %v after %d calls, want nil after 3", err, calls.Load())
	}

	boom := errors.New("boom")
	err = Poll(context.Background(), 50*time.Millisecond, func() error { return boom })
	if !errors.Is(err, boom) {
		t.Errorf("Poll past its deadline = %v, want the condition's error", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Poll(ctx, time.Minute, func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Poll with a done context = %v, want the condition's error", err)
	}
}

func TestUntil(t *testing.T) {
	start := time.Now()
	Until(t, time.Minute, "a condition that holds at once", func() bool { return true })
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Until took %v for a condition that held", d)
	}
}
