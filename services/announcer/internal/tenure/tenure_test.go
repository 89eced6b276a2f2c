package tenure

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestGrantWaitsForItsPlan(t *testing.T) {
	type step struct {
		grant     uint64 // generation granted for (0: none)
		installed uint64 // generation installed (0: none)
		close     bool
		valid     bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"nothing granted", []step{{valid: false}}},
		{"granted for the installed plan", []step{{installed: 1}, {grant: 1, valid: true}}},
		{"granted before its plan is installed", []step{{grant: 1, valid: false}, {installed: 1, valid: true}}},
		{"a stale plan does not spend a newer plan's right", []step{
			{installed: 1}, {grant: 2, valid: false}, {installed: 2, valid: true}}},
		{"an older grant still counts for the newer plan", []step{
			{installed: 2}, {grant: 1, valid: true}}},
		{"closed for good", []step{
			{installed: 1}, {grant: 1, valid: true}, {close: true, valid: false}, {grant: 1, valid: false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := New()
			var got, want []bool
			for _, s := range tt.steps {
				if s.installed > 0 {
					tn.Installed(s.installed)
				}
				if s.grant > 0 {
					tn.Grant(s.grant, time.Now().Add(time.Hour))
				}
				if s.close {
					tn.Close()
				}
				got = append(got, tn.Valid())
				want = append(want, s.valid)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("validity after each step (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRightRunsOut(t *testing.T) {
	tn := New()
	tn.Installed(1)
	tn.Grant(1, time.Now().Add(-time.Millisecond))
	if tn.Valid() {
		t.Fatal("a right that ended in the past is valid")
	}
	select {
	case <-tn.Resumed():
		t.Fatal("a right that never started was signalled as resumed")
	default:
	}
	tn.Grant(1, time.Now().Add(time.Hour))
	if !tn.Valid() {
		t.Fatal("a right granted for an hour is not valid")
	}
	select {
	case <-tn.Resumed():
	default:
		t.Fatal("the right started again without a signal")
	}
	tn.Grant(1, time.Now().Add(time.Minute)) // earlier: never shortens
	if got := time.Until(tn.Until()); got < 50*time.Minute {
		t.Fatalf("an earlier grant shortened the right to %v", got)
	}
}
