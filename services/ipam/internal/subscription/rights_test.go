package subscription

import (
	"context"
	"testing"
	"time"
)

type leaseLife time.Time

func (l leaseLife) AliveUntil() time.Time { return time.Time(l) }

func TestRightsGrant(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name      string
		aliveLeft time.Duration // how long the lease is known to live
		want      time.Duration
	}{
		{"the full length while the lease lives long", 2 * time.Second, 400 * time.Millisecond},
		{"cut to the lease's known life, less the margin", 300 * time.Millisecond, 200 * time.Millisecond},
		{"nothing once the lease may be about to expire", 50 * time.Millisecond, 0},
		{"nothing once the lease may have expired", -time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRights(400*time.Millisecond, leaseLife(now.Add(tt.aliveLeft)))
			if got := r.grant(now); got != tt.want {
				t.Errorf("grant = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRightsWait: a session ended by the replica waits for the last grant
// to run out before the node's registration is deleted.
func TestRightsWait(t *testing.T) {
	r := newRights(300*time.Millisecond, leaseLife(time.Now().Add(time.Hour)))
	granted := time.Now()
	d := r.grant(granted)
	r.wait(context.Background())
	if waited := time.Since(granted); waited < d {
		t.Errorf("wait returned %v after a grant of %v", waited, d)
	}
	// With nothing granted (or all of it run out), wait returns at once.
	start := time.Now()
	r.wait(context.Background())
	if time.Since(start) > 50*time.Millisecond {
		t.Errorf("wait with no grant left took %v", time.Since(start))
	}
}
