package limit

import (
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("call past the burst = %v, want ResourceExhausted", err)
	}
	var retry *errdetails.RetryInfo
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			retry = d
		case *errdetails.ErrorInfo:
			info = d
		}
	}
	if retry == nil || retry.GetRetryDelay().AsDuration() != 500*time.Millisecond {
		t.Errorf("RetryInfo = %v, want 500ms (one token at 2/s)", retry)
	}
	if info.GetReason() != "RATE_LIMITED" || info.GetMetadata()["tenant"] != "c1" {
		t.Errorf("ErrorInfo = %v", info)
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
