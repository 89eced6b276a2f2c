package subscription_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/subscription"
)

var hello = subscription.Message{Hello: &ipam.Node{
	Tenant: "t1", Name: "node-a", Labels: map[string]string{"zone": "a"},
	Interfaces: []ipam.Interface{{Name: "eth0", Up: true, Addrs: []netip.Prefix{netip.MustParsePrefix("198.51.100.10/24")}}},
}}

// start runs a session over f; its end comes on the channel.
func start(ctx context.Context, cfg subscription.Config, f *fakeStream) <-chan error {
	done := make(chan error, 1)
	go func() { done <- subscription.New(cfg, f).Run(ctx) }()
	return done
}

func ended(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(wait):
		t.Fatalf("the session did not end within %s", wait)
		return nil
	}
}

// beat sends unnumbered heartbeats every d until the returned stop is
// called, standing in for a live announcer.
func beat(f *fakeStream, d time.Duration) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			select {
			case f.in <- recvResult{msg: subscription.Message{Heartbeat: &subscription.Heartbeat{}}}:
			case <-quit:
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit) }); <-done }
}

// subscribe starts a session, and waits for its registration.
func subscribe(t *testing.T, e *env, cfg subscription.Config) (*fakeStream, <-chan error, *recordedLease) {
	t.Helper()
	f := newStream()
	done := start(e.ctx, cfg, f)
	f.send(t, hello)
	if ev := e.nextNode(t); ev.Deleted || ev.Ref.ID != "t1/node-a" {
		t.Fatalf("first registration event: %+v", ev)
	}
	return f, done, e.a.last(t)
}

// Until the announcer's hello is valid, nothing is registered: the session
// ends with the field errors (the handler makes them InvalidArgument), or
// with nothing when the announcer ended its stream first.
// errRefusedHello is a refusal of the access guard, as the server's stream gives it.
var errRefusedHello = fmt.Errorf("%w: %w", subscription.ErrRefused, errors.New("this announcer may subscribe only as node \"n1\""))

func TestHello(t *testing.T) {
	e := newEnv(t)
	badNode := ipam.FieldErrors{{Field: "hello.node", Reason: "bad"}}
	tests := []struct {
		name      string
		first     subscription.Message
		recvErr   error
		wantField []string // the fields of the field errors, nil: no error
	}{
		{"a heartbeat first", subscription.Message{Heartbeat: &subscription.Heartbeat{Sequence: 1}}, nil, []string{"hello"}},
		{"a message of an unknown kind first", subscription.Message{}, nil, []string{"hello"}},
		{"a status report first", subscription.Message{Status: &subscription.Status{}}, nil, []string{"hello"}},
		{"an invalid hello", subscription.Message{}, badNode, []string{"hello.node"}},
		{"the stream closed before the hello", subscription.Message{}, io.EOF, nil},
		{"the hello refused in front of the session", subscription.Message{}, errRefusedHello, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newStream()
			done := start(e.ctx, e.config(time.Second, nil), f)
			f.sendErr(t, tt.first, tt.recvErr)
			err := ended(t, done)
			if errors.Is(tt.recvErr, errRefusedHello) {
				if !errors.Is(err, errRefusedHello) {
					t.Errorf("session ended with %v, want the refusal", err)
				}
				return
			}
			var got []string
			var fes ipam.FieldErrors
			if errors.As(err, &fes) {
				for _, fe := range fes {
					got = append(got, fe.Field)
				}
			} else if err != nil {
				t.Fatalf("session ended with %v, want field errors or nothing", err)
			}
			if diff := cmp.Diff(tt.wantField, got); diff != "" {
				t.Errorf("fields of the error (-want +got):\n%s", diff)
			}
			e.noGrant(t)
			if _, err := e.st.Get(e.ctx, ipam.Ref{Kind: ipam.KindNode, ID: "t1/node-a"}); !errors.Is(err, ipam.ErrNotFound) {
				t.Errorf("registration after the session: %v, want not found", err)
			}
		})
	}
}

// A valid hello registers the node under the replica's lease, kept alive
// with a grace of two TTLs past its known life; the node's closing its
// stream ends the session without an error and deletes the registration
// at once.
func TestRegistrationAndNodeEnding(t *testing.T) {
	e := newEnv(t)
	f, done, l := subscribe(t, e, e.config(time.Second, nil))
	ev, err := e.st.Get(e.ctx, ipam.Ref{Kind: ipam.KindNode, ID: "t1/node-a"})
	if err != nil {
		t.Fatal(err)
	}
	want := &ipam.Node{Tenant: "t1", Name: "node-a", Labels: hello.Hello.Labels, Interfaces: hello.Hello.Interfaces, Live: true}
	if diff := cmp.Diff(want, ev.Value, cmpopts.IgnoreFields(ipam.Node{}, "ConnectTime"), cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
		t.Errorf("registration (-want +got):\n%s", diff)
	}
	f.ack(t, 1) // the session runs all its parts
	deadline := time.Now().Add(wait)
	for grace, _ := l.record(); grace != 2*subscription.LeaseTTL; grace, _ = l.record() {
		if time.Now().After(deadline) {
			t.Fatalf("lease kept alive with a grace of %v, want 2 TTLs (%v)", grace, 2*subscription.LeaseTTL)
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	f.close()
	if err := ended(t, done); err != nil {
		t.Errorf("session ended by the node: %v, want nil", err)
	}
	if ev := e.nextNode(t); !ev.Deleted {
		t.Fatalf("after the node ended its stream: %+v, want the registration deleted", ev)
	}
	// Deleted, not left to expire (the lease's TTL) nor held for the
	// node's rights: a node that closed its own stream gave them up.
	if d := time.Since(start); d >= subscription.LeaseTTL {
		t.Errorf("registration deleted %v after the stream closed, want at once", d)
	}
}

// Numbered heartbeats are acknowledged with an L2 right no longer than two
// heartbeat intervals (nor the lease's known life); plain heartbeats are
// sent every interval; three intervals without a message end the session
// with ErrNoHeartbeat, and the registration is deleted once the rights ran
// out.
func TestHeartbeats(t *testing.T) {
	e := newEnv(t)
	const hb = 300 * time.Millisecond
	f, done, _ := subscribe(t, e, e.config(hb, nil))
	stop := beat(f, hb/4)
	for seq := uint64(1); seq <= 3; seq++ {
		a := f.ack(t, seq)
		if a.ValidFor <= 0 || a.ValidFor > 2*hb {
			t.Errorf("ack %d grants %v, want within (0, %v]", seq, a.ValidFor, 2*hb)
		}
	}
	select {
	case <-f.beats:
	case <-time.After(wait):
		t.Fatalf("no plain heartbeat sent within %s", wait)
	}
	stop() // the announcer hangs with its stream open
	silent := time.Now()
	err := ended(t, done)
	if !errors.Is(err, subscription.ErrNoHeartbeat) {
		t.Fatalf("silent announcer's session ended with %v, want ErrNoHeartbeat", err)
	}
	if d := time.Since(silent); d < 3*hb-hb/4 {
		t.Errorf("session ended %v after the last message, want no sooner than 3 heartbeats (%v)", d, 3*hb)
	}
	if ev := e.nextNode(t); !ev.Deleted {
		t.Fatalf("after the watchdog: %+v, want the registration deleted", ev)
	}
	f.close()
}

// The node is sent its whole plan first, then only what changed.
func TestPlanSnapshotThenChanges(t *testing.T) {
	e := newEnv(t)
	e.addPeer("t1", "r1", 1)
	f, done, _ := subscribe(t, e, e.config(time.Second, nil))
	stop := beat(f, 100*time.Millisecond)
	defer stop()
	u := f.nextUpdate(t)
	if u.Snapshot == nil || u.Change != nil {
		t.Fatalf("first plan message: %+v, want a snapshot", u)
	}
	if diff := cmp.Diff([]string{"r1"}, peerIDs(u.Snapshot.Peers)); diff != "" {
		t.Errorf("snapshot's peers (-want +got):\n%s", diff)
	}
	if u.Tenant != "t1" || u.Node != "node-a" {
		t.Errorf("plan message for %s/%s, want t1/node-a", u.Tenant, u.Node)
	}
	e.addPeer("t1", "r2", 2)
	u = f.nextUpdate(t)
	if u.Snapshot != nil || u.Change == nil {
		t.Fatalf("second plan message: %+v, want a change", u)
	}
	if diff := cmp.Diff([]string{"r2"}, peerIDs(u.Change.UpsertPeers)); diff != "" {
		t.Errorf("change's new peers (-want +got):\n%s", diff)
	}
	stop()
	f.close()
	if err := ended(t, done); err != nil {
		t.Error(err)
	}
}

func peerIDs(ps []ipam.PlanPeer) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Peer.ID)
	}
	return out
}

// Reports are written only when they change, at most once per
// ReportInterval, and a failed write is retried rather than ending the
// session (an etcd election must not move the node's addresses).
func TestReports(t *testing.T) {
	e := newEnv(t)
	f, done, l := subscribe(t, e, e.config(time.Second, nil))
	stop := beat(f, 100*time.Millisecond)
	defer stop()
	seq := uint64(0)
	status := func(addr string) subscription.Message {
		return subscription.Message{Status: &subscription.Status{Announced: []ipam.AnnouncedAddr{{Addr: addr, Interfaces: []string{"eth0"}}}}}
	}
	// A change is written.
	f.send(t, status("198.51.100.20"))
	if ev := e.nextNode(t); len(ev.Value.(*ipam.Node).Announced) != 1 {
		t.Fatalf("registration after a status report: %+v", ev.Value)
	}
	// The same report again is not.
	f.send(t, status("198.51.100.20"))
	seq++
	f.ack(t, seq)
	e.noNodeWrite(t, 3*subscription.ReportInterval)

	// Many changes in a burst: written no more often than ReportInterval,
	// and the last one is what is left.
	_, before := l.record()
	for i := range 20 {
		f.send(t, status(netip.AddrFrom4([4]byte{198, 51, 100, byte(30 + i)}).String()))
	}
	want := netip.AddrFrom4([4]byte{198, 51, 100, 49}).String()
	for {
		ev := e.nextNode(t)
		if ev.Value.(*ipam.Node).Announced[0].Addr == want {
			break
		}
	}
	_, puts := l.record()
	puts = puts[len(before):]
	for i := 1; i < len(puts); i++ {
		if d := puts[i].Sub(puts[i-1]); d < subscription.ReportInterval {
			t.Errorf("writes %d and %d %v apart, want at least %v", i-1, i, d, subscription.ReportInterval)
		}
	}
	if len(puts) >= 20 {
		t.Errorf("%d writes for 20 reports in a burst", len(puts))
	}

	// A failed write is retried, and the session goes on.
	l.mu.Lock()
	l.failPuts = 2
	l.mu.Unlock()
	f.send(t, subscription.Message{Interfaces: &subscription.Interfaces{List: []ipam.Interface{{Name: "eth1", Up: true}}}})
	ev := e.nextNode(t)
	if diff := cmp.Diff([]ipam.Interface{{Name: "eth1", Up: true}}, ev.Value.(*ipam.Node).Interfaces, cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
		t.Errorf("interfaces after failed writes (-want +got):\n%s", diff)
	}
	seq++
	f.ack(t, seq) // still running
	select {
	case err := <-done:
		t.Fatalf("session ended by failed report writes: %v", err)
	default:
	}
	stop()
	f.close()
	if err := ended(t, done); err != nil {
		t.Error(err)
	}
}

// An invalid report ends the session with its field errors; the
// registration is deleted.
func TestInvalidReportEnds(t *testing.T) {
	e := newEnv(t)
	f, done, _ := subscribe(t, e, e.config(time.Second, nil))
	bad := ipam.FieldErrors{{Field: "status.conflicts[0].address", Reason: "must be an IP address"}}
	f.sendErr(t, subscription.Message{}, bad)
	var fes ipam.FieldErrors
	if err := ended(t, done); !errors.As(err, &fes) || fes[0].Field != "status.conflicts[0].address" {
		t.Errorf("session ended with %v, want the field errors", err)
	}
	if ev := e.nextNode(t); !ev.Deleted {
		t.Fatalf("after an invalid report: %+v, want the registration deleted", ev)
	}
	f.close()
}

// The replica's lease lost (revoked behind its back, as when it expires)
// ends every session tied to it with ErrLeaseLost; the next session is
// granted a new lease.
func TestReplicaLeaseLossEndsEverySession(t *testing.T) {
	e := newEnv(t)
	fa, doneA, l := subscribe(t, e, e.config(time.Second, nil))
	stopA := beat(fa, 100*time.Millisecond)
	defer stopA()
	fb, doneB := startNode(t, e, e.config(time.Second, nil), "node-b")
	stopB := beat(fb, 100*time.Millisecond)
	defer stopB()
	// Both registered before the lease goes (a registration written as it
	// goes fails as a write, not as a lost lease).
	if ev := e.nextNode(t); ev.Deleted || ev.Ref.ID != "t1/node-b" {
		t.Fatalf("node-b's registration event: %+v", ev)
	}
	if first := e.nextGrant(t); first.id() != l.id() {
		t.Fatalf("lease granted %x, want the replica's %x", first.id(), l.id())
	}
	e.noGrant(t) // node-b's session took the replica's lease: no grant
	e.revoke(t, l)
	for _, done := range []<-chan error{doneA, doneB} {
		if err := ended(t, done); !errors.Is(err, subscription.ErrLeaseLost) {
			t.Errorf("session ended with %v, want ErrLeaseLost", err)
		}
	}
	stopA()
	stopB()
	fa.close()
	fb.close()
	// The next session is granted a new lease.
	f, done := startNode(t, e, e.config(time.Second, nil), "node-c")
	if next := e.nextGrant(t); next.id() == l.id() {
		t.Errorf("lease after the loss %x, want a new one", next.id())
	}
	f.close()
	_ = ended(t, done)
}

// Two nodes on one replica share its lease (one grant); when one node's
// session ends only its registration goes, and the other's stays past the
// lease's TTL.
func TestTwoNodesShareTheReplicaLease(t *testing.T) {
	e := newEnv(t)
	fa, doneA, l := subscribe(t, e, e.config(time.Second, nil))
	stopA := beat(fa, 100*time.Millisecond)
	defer stopA()
	fb, doneB := startNode(t, e, e.config(time.Second, nil), "node-b")
	if ev := e.nextNode(t); ev.Deleted || ev.Ref.ID != "t1/node-b" {
		t.Fatalf("node-b's registration event: %+v", ev)
	}
	_ = e.nextGrant(t) // node-a's
	e.noGrant(t)       // and none for node-b
	// Its plan sent before its stream closes (a send on a closed stream
	// would end the session with that error, not as the node's end).
	if u := fb.nextUpdate(t); u.Snapshot == nil {
		t.Fatalf("node-b's first plan message: %+v, want a snapshot", u)
	}
	fb.close()
	if err := ended(t, doneB); err != nil {
		t.Errorf("node-b's session ended with %v", err)
	}
	if ev := e.nextNode(t); !ev.Deleted || ev.Ref.ID != "t1/node-b" {
		t.Fatalf("after node-b ended: %+v, want node-b's registration deleted", ev)
	}
	e.noNodeWrite(t, subscription.LeaseTTL+subscription.LeaseTTL/2)
	if _, err := e.st.Get(e.ctx, ipam.Ref{Kind: ipam.KindNode, ID: "t1/node-a"}); err != nil {
		t.Errorf("node-a's registration after node-b's session ended: %v", err)
	}
	fa.ack(t, 1) // still running, the lease alive
	if got := e.a.last(t); got.id() != l.id() {
		t.Errorf("replica's lease %x, want %x still", got.id(), l.id())
	}
	stopA()
	fa.close()
	if err := ended(t, doneA); err != nil {
		t.Error(err)
	}
}

// startNode starts a session of node name (tenant t1).
func startNode(t *testing.T, e *env, cfg subscription.Config, name string) (*fakeStream, <-chan error) {
	t.Helper()
	f := newStream()
	done := start(e.ctx, cfg, f)
	f.send(t, subscription.Message{Hello: &ipam.Node{Tenant: "t1", Name: name}})
	return f, done
}

// nextGrant returns the next lease granted.
func (e *env) nextGrant(t *testing.T) *recordedLease {
	t.Helper()
	select {
	case l := <-e.granted:
		return l
	case <-time.After(wait):
		t.Fatalf("no lease granted within %s", wait)
		return nil
	}
}

// A stopping replica ends its sessions with ErrStopping, grants the node
// a last right as long as its lease is known to live, and leaves the
// registration to expire with the lease rather than deleting it, so that
// a reconnecting announcer keeps its registration.
func TestStoppingLeavesLease(t *testing.T) {
	e := newEnv(t)
	stopping := make(chan struct{})
	f, done, _ := subscribe(t, e, e.config(time.Second, stopping))
	stop := beat(f, 100*time.Millisecond)
	defer stop()
	f.ack(t, 7)
	close(stopping)
	var last subscription.Ack
	select {
	case last = <-f.acks:
	case <-time.After(wait):
		t.Fatalf("no farewell acknowledgement within %s", wait)
	}
	if last.Sequence != 7 || last.ValidFor <= 0 || last.ValidFor > subscription.LeaseTTL {
		t.Errorf("farewell %+v, want heartbeat 7 granted up to the lease's life", last)
	}
	if err := ended(t, done); !errors.Is(err, subscription.ErrStopping) {
		t.Errorf("session ended with %v, want ErrStopping", err)
	}
	if _, err := e.st.Get(e.ctx, ipam.Ref{Kind: ipam.KindNode, ID: "t1/node-a"}); err != nil {
		t.Errorf("registration right after the stop: %v, want it left to expire", err)
	}
	e.a.stop() // the replica's lease is no longer kept alive
	if ev := e.nextNode(t); !ev.Deleted {
		t.Fatalf("after the stop: %+v, want the registration to expire", ev)
	}
	stop()
	f.close()
}

// A replica whose lease stops being kept alive without a graceful stop
// first (its storage gave up, and StopStreams has not run yet) ends its
// sessions with ErrStopping and, as a stopping replica, leaves their
// registrations to expire with the lease rather than deleting them: an
// announcer that reconnects elsewhere keeps its addresses.
func TestLeaseStoppedLeavesRegistration(t *testing.T) {
	e := newEnv(t)
	f, done, _ := subscribe(t, e, e.config(time.Second, nil))
	stop := beat(f, 100*time.Millisecond)
	defer stop()
	f.ack(t, 1)
	e.a.stop() // the lease's keeper ends; the replica's streams do not
	if err := ended(t, done); !errors.Is(err, subscription.ErrStopping) {
		t.Errorf("session ended with %v, want ErrStopping", err)
	}
	if _, err := e.st.Get(e.ctx, ipam.Ref{Kind: ipam.KindNode, ID: "t1/node-a"}); err != nil {
		t.Errorf("registration right after the lease stopped: %v, want it left to expire", err)
	}
	if ev := e.nextNode(t); !ev.Deleted {
		t.Fatalf("after the lease stopped: %+v, want the registration to expire", ev)
	}
	stop()
	f.close()
}
