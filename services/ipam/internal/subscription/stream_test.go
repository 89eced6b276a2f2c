package subscription_test

import (
	"errors"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/subscription"
)

// errClosed is what Recv returns once the announcer closed its stream.
var errClosed = errors.New("stream closed")

type recvResult struct {
	msg subscription.Message
	err error
}

// fakeStream is the announcer's end of a session: the test sends what
// the announcer would, and reads what it is sent.
type fakeStream struct {
	in      chan recvResult
	closed  chan struct{}
	updates chan subscription.Update
	acks    chan subscription.Ack
	beats   chan struct{} // plain heartbeats (dropped when nobody reads)
}

func newStream() *fakeStream {
	return &fakeStream{
		in: make(chan recvResult), closed: make(chan struct{}),
		updates: make(chan subscription.Update, 100), acks: make(chan subscription.Ack, 100), beats: make(chan struct{}, 1),
	}
}

func (f *fakeStream) Recv() (subscription.Message, error) {
	select {
	case r := <-f.in:
		return r.msg, r.err
	case <-f.closed:
		return subscription.Message{}, errClosed
	}
}

func (f *fakeStream) SendUpdate(u subscription.Update) error {
	select {
	case f.updates <- u:
		return nil
	case <-f.closed:
		return errClosed
	}
}

func (f *fakeStream) SendHeartbeat(ack *subscription.Ack) error {
	if ack == nil {
		select {
		case f.beats <- struct{}{}:
		default:
		}
		return nil
	}
	select {
	case f.acks <- *ack:
		return nil
	case <-f.closed:
		return errClosed
	}
}

// send delivers one message of the announcer to the session.
func (f *fakeStream) send(t *testing.T, msg subscription.Message) {
	t.Helper()
	f.sendErr(t, msg, nil)
}

func (f *fakeStream) sendErr(t *testing.T, msg subscription.Message, err error) {
	t.Helper()
	select {
	case f.in <- recvResult{msg, err}:
	case <-time.After(wait):
		t.Fatalf("the session received nothing for %s", wait)
	}
}

// ack sends numbered heartbeat seq and waits for its acknowledgement:
// once it comes, the session has handled every message sent before it.
func (f *fakeStream) ack(t *testing.T, seq uint64) subscription.Ack {
	t.Helper()
	f.send(t, subscription.Message{Heartbeat: &subscription.Heartbeat{Sequence: seq}})
	deadline := time.After(wait)
	for {
		select {
		case a := <-f.acks:
			if a.Sequence == seq {
				return a
			}
		case <-deadline:
			t.Fatalf("heartbeat %d not acknowledged within %s", seq, wait)
		}
	}
}

// close ends the stream from the announcer's side.
func (f *fakeStream) close() { close(f.closed) }

// nextUpdate returns the next plan message.
func (f *fakeStream) nextUpdate(t *testing.T) subscription.Update {
	t.Helper()
	select {
	case u := <-f.updates:
		return u
	case <-time.After(wait):
		t.Fatalf("no plan message within %s", wait)
		return subscription.Update{}
	}
}
