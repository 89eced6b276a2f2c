package subscription_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/subscription"
)

// firstSession runs a node's session until its snapshot came and a
// heartbeat was acknowledged: what an announcer holds before its replica
// goes away. It returns the token of that plan.
func firstSession(t *testing.T, e *env, cfg subscription.Config) (*fakeStream, <-chan error, *recordedLease, string) {
	t.Helper()
	f, done, l := subscribe(t, e, cfg)
	u := f.nextUpdate(t)
	if u.Snapshot == nil {
		t.Fatalf("first plan message: %+v, want a snapshot", u)
	}
	if u.Token == "" || u.Token != subscription.Token(u.Snapshot) {
		t.Fatalf("snapshot's token %q, want the plan's (%q)", u.Token, subscription.Token(u.Snapshot))
	}
	f.ack(t, 1)
	return f, done, l, u.Token
}

// resume starts a session whose hello carries token.
func resume(t *testing.T, e *env, cfg subscription.Config, token string) (*fakeStream, <-chan error) {
	t.Helper()
	f := newStream()
	done := start(e.ctx, cfg, f)
	h := hello
	h.ResumeToken = token
	f.send(t, h)
	return f, done
}

// nextLease returns the next lease granted or adopted, and which.
func (e *env) nextLease(t *testing.T) (l *recordedLease, adopted bool) {
	t.Helper()
	select {
	case l := <-e.granted:
		return l, false
	case l := <-e.adopted:
		return l, true
	case <-time.After(wait):
		t.Fatalf("no lease granted or adopted within %s", wait)
		return nil, false
	}
}

// noDeletion fails if the node's registration is deleted within d.
func (e *env) noDeletion(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev := <-e.nodes:
			if ev.Deleted {
				t.Fatalf("registration deleted: %+v", ev)
			}
		case <-deadline:
			return
		}
	}
}

// A node whose replica stops resumes on another with the token of the
// plan it holds: it is sent an empty change (you are current), not a
// snapshot; its registration stays under the same lease, now kept alive
// by the new session (no lease granted), past the lease's TTL; and the
// new session grants L2 rights for the plan the node holds.
func TestResumeSendsNoSnapshotAndKeepsLease(t *testing.T) {
	e := newEnv(t)
	e.addPeer("t1", "r1", 1)
	stopping := make(chan struct{})
	f1, done1, l1, token := firstSession(t, e, e.config(time.Second, stopping))
	close(stopping) // replica A stops: its farewell, then the lease is left
	if err := ended(t, done1); !errors.Is(err, subscription.ErrStopping) {
		t.Fatalf("first session ended with %v, want ErrStopping", err)
	}
	f1.close()

	f2, done2 := resume(t, e, e.config(time.Second, nil), token)
	stop := beat(f2, 100*time.Millisecond)
	defer stop()
	l2, adopted := e.nextLease(t)
	if !adopted {
		t.Fatalf("resuming session was granted a new lease, want the node's lease adopted")
	}
	if l2.id() != l1.id() {
		t.Errorf("resuming session holds lease %x, want the node's lease %x", l2.id(), l1.id())
	}
	u := f2.nextUpdate(t)
	if u.Snapshot != nil || u.Change == nil || !u.Change.Empty() {
		t.Fatalf("first plan message of the resumed session: %+v, want an empty change", u)
	}
	if u.Token != token {
		t.Errorf("token after resuming %q, want the one resumed %q", u.Token, token)
	}
	if a := f2.ack(t, 1); a.ValidFor <= 0 {
		t.Errorf("resumed session's first right: %v, want one", a.ValidFor)
	}
	// Past the lease's TTL: the registration is still there.
	e.noDeletion(t, subscription.NodeLeaseTTL+subscription.NodeLeaseTTL/2)
	select {
	case l := <-e.granted:
		t.Errorf("a lease was granted: %x", l.id())
	default:
	}
	if _, err := e.st.Get(e.ctx, ipam.Ref{Kind: ipam.KindNode, ID: "t1/node-a"}); err != nil {
		t.Errorf("registration after the lease's TTL: %v", err)
	}
	// A change after the resume is a change from the plan the node holds.
	e.addPeer("t1", "r2", 2)
	u = f2.nextUpdate(t)
	if u.Change == nil || len(u.Change.UpsertPeers) != 1 || u.Change.UpsertPeers[0].Peer.ID != "r2" {
		t.Errorf("plan message after a new peer: %+v, want a change adding r2", u)
	}
	stop()
	f2.close()
	if err := ended(t, done2); err != nil {
		t.Error(err)
	}
}

// A node that resumes while its old session still runs (the announcer's
// connection to the old replica broke and that replica has not noticed
// yet) keeps its registration when the old session then ends: the old
// session does not revoke a lease the new one took over.
func TestOldSessionLeavesAdoptedLease(t *testing.T) {
	e := newEnv(t)
	e.addPeer("t1", "r1", 1)
	f1, done1, l1, token := firstSession(t, e, e.config(time.Second, nil))
	stop1 := beat(f1, 100*time.Millisecond)
	f2, done2 := resume(t, e, e.config(time.Second, nil), token)
	stop2 := beat(f2, 100*time.Millisecond)
	defer stop2()
	if l2, adopted := e.nextLease(t); !adopted || l2.id() != l1.id() {
		t.Fatalf("resuming session's lease %x (adopted %v), want the node's %x adopted", l2.id(), adopted, l1.id())
	}
	if u := f2.nextUpdate(t); u.Snapshot != nil {
		t.Fatalf("resumed session sent a snapshot")
	}
	stop1()
	f1.close() // the old session ends as if its connection broke
	if err := ended(t, done1); err != nil {
		t.Errorf("old session ended with %v", err)
	}
	e.noDeletion(t, subscription.NodeLeaseTTL+subscription.NodeLeaseTTL/2)
	f2.ack(t, 1) // still running, its lease alive
	select {
	case err := <-done2:
		t.Fatalf("resumed session ended: %v", err)
	default:
	}
	stop2()
	f2.close()
	if err := ended(t, done2); err != nil {
		t.Error(err)
	}
	// The node ending its stream still revokes at once.
	if ev := e.nextNode(t); !ev.Deleted {
		t.Errorf("after the resumed session ended: %+v, want the registration deleted", ev)
	}
}

// A token that does not match the node's plan (stale: the plan changed
// meanwhile; forged; malformed) gets the node a snapshot, never an error.
// A token never brings the node another node's lease: only the node's own
// registration's lease is adopted, and a node without one is granted a
// new lease.
func TestResumeWithBadToken(t *testing.T) {
	tests := []struct {
		name  string
		token func(held string) string
	}{
		{"stale", func(held string) string { return held }},
		{"of another plan", func(string) string {
			return subscription.Token(&ipam.NodePlan{L2: []ipam.PlanL2{{Addr: netip.MustParseAddr("203.0.113.9")}}})
		}},
		{"malformed", func(string) string { return "p2.not-base64!" }},
		{"of the wrong length", func(held string) string { return held[:len(held)-4] }},
		{"of the earlier format", func(held string) string { return "p1." + strings.TrimPrefix(held, "p2.") }},
		{"unknown format", func(string) string { return "v9.AAAA" }},
		{"empty", func(string) string { return "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.addPeer("t1", "r1", 1)
			stopping := make(chan struct{})
			f1, done1, _, held := firstSession(t, e, e.config(time.Second, stopping))
			close(stopping)
			_ = ended(t, done1)
			f1.close()
			e.addPeer("t1", "r2", 2) // the plan changes while the node is away: held is stale
			f2, done2 := resume(t, e, e.config(time.Second, nil), tt.token(held))
			stop := beat(f2, 100*time.Millisecond)
			defer stop()
			u := f2.nextUpdate(t)
			if u.Snapshot == nil {
				t.Fatalf("first plan message: %+v, want a snapshot", u)
			}
			if len(u.Snapshot.Peers) != 2 {
				t.Errorf("snapshot has %d peers, want 2", len(u.Snapshot.Peers))
			}
			f2.ack(t, 1)
			stop()
			f2.close()
			if err := ended(t, done2); err != nil {
				t.Errorf("session ended with %v", err)
			}
		})
	}
}

// Another node's token brings a node no lease but its own.
func TestResumeNeverAdoptsAnotherNodesLease(t *testing.T) {
	e := newEnv(t)
	e.addPeer("t1", "r1", 1)
	other := subscription.Message{Hello: &ipam.Node{Tenant: "t1", Name: "node-b"}}
	fb := newStream()
	doneB := start(e.ctx, e.config(time.Second, nil), fb)
	fb.send(t, other)
	lb := e.lease(t)
	stopB := beat(fb, 100*time.Millisecond)
	defer stopB()
	ub := fb.nextUpdate(t)

	f, done := resume(t, e, e.config(time.Second, nil), ub.Token)
	stop := beat(f, 100*time.Millisecond)
	defer stop()
	l, adopted := e.nextLease(t)
	if adopted || l.id() == lb.id() {
		t.Errorf("node-a with node-b's token got lease %x (adopted %v); node-b's is %x: want a new one", l.id(), adopted, lb.id())
	}
	f.nextUpdate(t)
	stop()
	f.close()
	_ = ended(t, done)
	stopB()
	fb.close()
	_ = ended(t, doneB)
}
