package limit

import (
	"errors"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/gateway/internal/fault"
)

func TestBucketPerTenantAndRole(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New(Config{Rate: 2, Burst: 3})
	l.now = func() time.Time { return now }
	for i := range 3 {
		if d := l.Allow("tenant", "c1"); d != 0 {
			t.Fatalf("call %d within the burst refused: wait %v", i, d)
		}
	}
	wait := l.Allow("tenant", "c1")
	if wait != 500*time.Millisecond {
		t.Errorf("wait past the burst = %v, want 500ms (one token at 2/s)", wait)
	}
	err := l.Refuse("tenant", "c1", wait)
	var refusal *fault.LimitError
	if !errors.As(err, &refusal) {
		t.Fatalf("call past the burst = %v, want a fault.LimitError", err)
	}
	if refusal.Wait != 500*time.Millisecond {
		t.Errorf("wait = %v, want 500ms (one token at 2/s)", refusal.Wait)
	}
	if refusal.Reason != "RATE_LIMITED" || refusal.Meta["tenant"] != "c1" {
		t.Errorf("refusal = %+v", refusal)
	}

	// Other buckets are untouched: another tenant, another role.
	for _, k := range [][2]string{{"tenant", "c2"}, {"announcer", "c1"}, {"admin", ""}} {
		if d := l.Allow(k[0], k[1]); d != 0 {
			t.Errorf("%v refused after c1's flood: wait %v", k, d)
		}
	}

	// A refused call costs nothing: after the delay a token is there.
	now = now.Add(500 * time.Millisecond)
	if d := l.Allow("tenant", "c1"); d != 0 {
		t.Errorf("after waiting the RetryInfo delay: wait %v", d)
	}
	if d := l.Allow("tenant", "c1"); d == 0 {
		t.Error("second call right after the refill allowed")
	}
}

func TestOff(t *testing.T) {
	var nilLimiter *Limiter
	if d := nilLimiter.Allow("tenant", "c1"); d != 0 {
		t.Error(d)
	}
	l := New(Config{})
	for range 1000 {
		if d := l.Allow("tenant", "c1"); d != 0 {
			t.Fatal(d)
		}
	}
}
