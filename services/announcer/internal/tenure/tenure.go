// Package tenure holds the node's right to answer ARP and NDP for its L2
// addresses: a deadline on the monotonic clock that the IPAM extends with
// every heartbeat it acknowledges (HeartbeatAck), bound to the plan it was
// granted for.
//
// The IPAM never hands a node's addresses to another node before every
// right it granted that node has run out (docs/announcement.md, "L2
// ownership"). The L2 responder asks Valid at the moment it sends each
// reply and announcement, so a node that was frozen, stalled or cut off
// answers nothing once its right has run out, not even the requests that
// queued up in its sockets meanwhile, and answers again only after the
// IPAM has confirmed its plan.
//
// A right is granted for a plan generation: the IPAM's acknowledgement
// covers the plan it had sent the node before it. The right counts only
// once the responder answers from that plan or a newer one (Installed): a
// node that wakes from a freeze with a stale plan, reconnects and is
// granted a right for its new plan must not spend that right answering
// from the stale one in the moments before the new plan is in place.
//
// The announcer's session (ipamclient) grants, and closes on its way out; the reconciler
// reports which generation is installed; the responder asks. It imports
// only the standard library.
package tenure

import (
	"sync"
	"sync/atomic"
	"time"
)

// Tenure is the node's right to answer for its L2 addresses. The zero value
// is not usable; call New.
type Tenure struct {
	base time.Time    // monotonic origin of until
	end  atomic.Int64 // nanoseconds after base at which the right ends; 0: none

	mu        sync.Mutex
	installed uint64 // newest plan generation the responder answers from
	pending   grant  // a right for a generation not yet installed
	closed    bool   // given up for good
	resumed   chan struct{}
}

type grant struct {
	gen   uint64
	until time.Time
}

// New returns a Tenure that grants nothing yet.
func New() *Tenure {
	return &Tenure{base: time.Now(), resumed: make(chan struct{}, 1)}
}

// Valid reports whether the node may answer now.
func (t *Tenure) Valid() bool {
	end := t.end.Load()
	return end > 0 && int64(time.Since(t.base)) < end
}

// Until returns when the right ends (the zero time if none was granted).
func (t *Tenure) Until() time.Time {
	end := t.end.Load()
	if end == 0 {
		return time.Time{}
	}
	return t.base.Add(time.Duration(end))
}

// Resumed is signalled when the node's right starts again after it had none
// (or had run out): the responder announces its addresses anew then,
// since announcements due meanwhile were not sent.
func (t *Tenure) Resumed() <-chan struct{} { return t.resumed }

// Grant extends the right to until for the plan of generation gen (the
// newest the session had received when the IPAM acknowledged). It takes
// effect at once when that plan is installed, else once it is.
func (t *Tenure) Grant(gen uint64, until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if gen > t.installed {
		if gen > t.pending.gen || (gen == t.pending.gen && until.After(t.pending.until)) {
			t.pending = grant{gen: gen, until: until}
		}
		return
	}
	t.extend(until)
}

// Installed records that the responder answers from the plan of generation
// gen (and applies a right granted for it while it was on its way).
func (t *Tenure) Installed(gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if gen <= t.installed {
		return
	}
	t.installed = gen
	if t.pending.gen != 0 && t.pending.gen <= gen {
		t.extend(t.pending.until)
		t.pending = grant{}
	}
}

// Close ends the right now and for good: the node gives it up before it
// closes its session on the way out, after which the IPAM may move its
// addresses at once. Later grants are ignored.
func (t *Tenure) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	t.end.Store(0)
	t.pending = grant{}
}

// extend moves the end to until if that is later. The caller holds mu.
func (t *Tenure) extend(until time.Time) {
	wasValid := t.Valid()
	end := max(int64(until.Sub(t.base)), 1)
	if end <= t.end.Load() {
		return
	}
	t.end.Store(end)
	if !wasValid && t.Valid() {
		select {
		case t.resumed <- struct{}{}:
		default:
		}
	}
}
