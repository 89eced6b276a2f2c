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
// snapshot; its registration is rewritten under the new replica's lease
// with no lease granted (the replica holds one already), and stays past
// the old replica's lease's expiry; and the new session grants L2 rights
// for the plan the node holds.
func TestResumeSendsNoSnapshotAndKeepsRegistration(t *testing.T) {
	e := newEnv(t)
	e.addPeer("t1", "r1", 1)
	b := e.replica(t)
	if _, err := b.lease.Acquire(e.ctx); err != nil { // replica B serves others already
		t.Fatal(err)
	}
	lb := e.nextGrant(t)
	stopping := make(chan struct{})
	f1, done1, l1, token := firstSession(t, e, e.config(time.Second, stopping))
	if l1.id() == lb.id() {
		t.Fatalf("replicas A and B hold the same lease %x", l1.id())
	}
	_ = e.nextGrant(t) // A's
	close(stopping)    // replica A stops: its farewell, then its lease is left
	if err := ended(t, done1); !errors.Is(err, subscription.ErrStopping) {
		t.Fatalf("first session ended with %v, want ErrStopping", err)
	}
	e.a.stop()
	f1.close()

	f2, done2 := resume(t, e, e.configOn(b, time.Second, nil), token)
	stop := beat(f2, 100*time.Millisecond)
	defer stop()
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
	// Past A's lease's TTL: the registration is still there.
	e.noDeletion(t, subscription.LeaseTTL+subscription.LeaseTTL/2)
	e.noGrant(t)
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

// A node that resumes on replica B while its old session on replica A
// still runs (the announcer's connection to A broke and A has not noticed
// yet, or A is cut off and late): the old session can neither write the
// registration B wrote (its next report write fails, and it ends with
// ErrTakenOver) nor delete it when it ends; the registration stays past
// the TTL under B's lease.
func TestOldSessionCannotTouchTakenRegistration(t *testing.T) {
	for _, how := range []string{"its stream ends", "it writes a report"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			e.addPeer("t1", "r1", 1)
			b := e.replica(t)
			f1, done1, _, token := firstSession(t, e, e.config(time.Second, nil))
			stop1 := beat(f1, 100*time.Millisecond)
			defer stop1()
			f2, done2 := resume(t, e, e.configOn(b, time.Second, nil), token)
			stop2 := beat(f2, 100*time.Millisecond)
			defer stop2()
			if u := f2.nextUpdate(t); u.Snapshot != nil {
				t.Fatalf("resumed session sent a snapshot")
			}
			if ev := e.nextNode(t); ev.Deleted { // rewritten by B's session
				t.Fatalf("registration deleted: %+v", ev)
			}
			switch how {
			case "its stream ends":
				stop1()
				f1.close() // the old session ends as if its connection broke
				if err := ended(t, done1); err != nil {
					t.Errorf("old session ended with %v", err)
				}
			case "it writes a report":
				f1.send(t, subscription.Message{Interfaces: &subscription.Interfaces{List: []ipam.Interface{{Name: "eth9", Up: true}}}})
				if err := ended(t, done1); !errors.Is(err, subscription.ErrTakenOver) {
					t.Errorf("old session ended with %v, want ErrTakenOver", err)
				}
				stop1()
				f1.close()
			}
			e.noNodeWrite(t, subscription.LeaseTTL+subscription.LeaseTTL/2)
			ev, err := e.st.Get(e.ctx, ipam.Ref{Kind: ipam.KindNode, ID: "t1/node-a"})
			if err != nil {
				t.Fatalf("registration after the old session ended: %v", err)
			}
			if itfs := ev.Value.(*ipam.Node).Interfaces; len(itfs) != 1 || itfs[0].Name != "eth0" {
				t.Errorf("registration's interfaces %+v, want the new session's (eth0)", itfs)
			}
			f2.ack(t, 1) // still running
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
			// The node ending its stream still deletes at once.
			if ev := e.nextNode(t); !ev.Deleted {
				t.Errorf("after the resumed session ended: %+v, want the registration deleted", ev)
			}
		})
	}
}

// A token that does not match the node's plan (stale: the plan changed
// meanwhile; forged; malformed) gets the node a snapshot, never an error.
// A token never brings the node another node's registration (see
// TestResumeWithAnotherNodesToken).
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

// Another node's token brings a node nothing of that node's: its session
// writes only its own registration, and the other node's session goes on.
func TestResumeWithAnotherNodesToken(t *testing.T) {
	e := newEnv(t)
	e.addPeer("t1", "r1", 1)
	fb, doneB := startNode(t, e, e.config(time.Second, nil), "node-b")
	if ev := e.nextNode(t); ev.Ref.ID != "t1/node-b" {
		t.Fatalf("first registration event: %+v", ev)
	}
	stopB := beat(fb, 100*time.Millisecond)
	defer stopB()
	ub := fb.nextUpdate(t)

	f, done := resume(t, e, e.config(time.Second, nil), ub.Token)
	stop := beat(f, 100*time.Millisecond)
	defer stop()
	f.nextUpdate(t)
	if ev := e.nextNode(t); ev.Deleted || ev.Ref.ID != "t1/node-a" {
		t.Errorf("node-a's session wrote %+v, want only its own registration", ev)
	}
	e.noNodeWrite(t, 500*time.Millisecond)
	fb.ack(t, 1) // node-b's session goes on
	stop()
	f.close()
	_ = ended(t, done)
	stopB()
	fb.close()
	_ = ended(t, doneB)
}
