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
		if err := l.Allow("tenant", "c1"); err != nil {
			t.Fatalf("call %d within the burst refused: %v", i, err)
		}
	}
	err := l.Allow("tenant", "c1")
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
		if err := l.Allow(k[0], k[1]); err != nil {
			t.Errorf("%v refused after c1's flood: %v", k, err)
		}
	}

	// A refused call costs nothing: after the delay a token is there.
	now = now.Add(500 * time.Millisecond)
	if err := l.Allow("tenant", "c1"); err != nil {
		t.Errorf("after waiting the RetryInfo delay: %v", err)
	}
	if err := l.Allow("tenant", "c1"); err == nil {
		t.Error("second call right after the refill allowed")
	}
}

func TestOff(t *testing.T) {
	var nilLimiter *Limiter
	if err := nilLimiter.Allow("tenant", "c1"); err != nil {
		t.Error(err)
	}
	l := New(Config{})
	for range 1000 {
		if err := l.Allow("tenant", "c1"); err != nil {
			t.Fatal(err)
		}
	}
}
