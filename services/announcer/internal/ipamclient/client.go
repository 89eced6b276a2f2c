// Package ipamclient is the announcer's session with the IPAM: it
// subscribes with the node's identity, sends heartbeats and status, keeps
// the node's plan from the snapshot and changes it receives, and reconnects
// with backoff to any of several IPAM endpoints.
//
// It keeps the node's L2 rights (Options.Rights): every heartbeat carries a
// sequence number, and the IPAM's acknowledgement grants the right to answer
// for the plan sent so far until valid_for after that heartbeat was sent
// (on this node's monotonic clock). A session's acknowledgements count only
// once its snapshot has arrived, so a reconnected node never extends its old
// plan's right with the new session's word, unless the node resumed: it
// sends the resume token of the plan it holds, and the IPAM's empty change
// in answer vouches for that very plan as a snapshot would. On its way out
// the client gives the right up before it closes its stream.
//
// Reconnects back off with jitter (each wait drawn from a quarter of the
// backoff to all of it, the first within 100 ms, at most 250 ms apart
// while the node holds its plan), so that the nodes of a replica that died
// do not all arrive at the next one at once.
//
// When it has been cut off from every IPAM for longer than the grace period
// it also says so (Update.Lost), so that the node drops its L2 addresses
// altogether and announces them afresh once it is back.
package ipamclient

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// Identity is what the node tells the IPAM about itself.
type Identity struct {
	Tenant string
	Node   string
	Labels map[string]string
}

// Rights is the node's right to answer for its L2 addresses (see package
// tenure): granted per plan generation, closed on the way out.
type Rights interface {
	Grant(gen uint64, until time.Time)
	Close()
}

// Options tunes a Client.
type Options struct {
	// Rights receives the L2 rights the IPAM grants (nil: none kept).
	Rights Rights
	// Grace is how long the node keeps its L2 addresses in place while cut
	// off from every IPAM (default 2 s: the TTL of the IPAM replica's lease); it answers
	// for them only while Rights says so, which ends much sooner.
	Grace time.Duration
	// MaxBackoff caps the wait between reconnects (default 2 s).
	MaxBackoff time.Duration
}

// Update is the plan to announce now; Lost is set when the node has been
// cut off longer than the grace period (announce no L2 then). Gen numbers
// the plans' L2 address sets as they change, from 1; a reader reports the
// Gen it installed to the node's Rights.
type Update struct {
	Plan *Plan
	Gen  uint64
	Lost bool
}

// Client is the node's session with the IPAM.
type Client struct {
	conns  []grpc.ClientConnInterface
	id     Identity
	logger *slog.Logger
	opts   Options

	mu         sync.Mutex
	interfaces []*ipamv1.NetworkInterface
	status     *ipamv1.AnnouncerStatus
	poke       chan struct{} // interfaces or status changed

	updates chan Update
	gen     atomic.Uint64 // of the newest plan received
}

// New returns a Client over connections to IPAM replicas (tried in turn).
func New(conns []grpc.ClientConnInterface, id Identity, logger *slog.Logger, opts Options) *Client {
	if opts.Grace <= 0 {
		opts.Grace = 2 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 2 * time.Second
	}
	if opts.Rights == nil {
		opts.Rights = noRights{}
	}
	return &Client{conns: conns, id: id, logger: logger, opts: opts, poke: make(chan struct{}, 1), updates: make(chan Update, 1)}
}

// Updates delivers the latest plan; a slow reader only misses intermediate
// plans, never the latest.
func (c *Client) Updates() <-chan Update { return c.updates }

func (c *Client) publish(u Update) {
	for {
		select {
		case c.updates <- u:
			return
		default:
		}
		select {
		case <-c.updates: // drop the stale one
		default:
		}
	}
}

// SetInterfaces records the node's interfaces and tells the IPAM.
func (c *Client) SetInterfaces(itfs []*ipamv1.NetworkInterface) {
	c.mu.Lock()
	c.interfaces = itfs
	c.mu.Unlock()
	c.nudge()
}

// SetStatus records what the node announces and tells the IPAM.
func (c *Client) SetStatus(st *ipamv1.AnnouncerStatus) {
	c.mu.Lock()
	c.status = st
	c.mu.Unlock()
	c.nudge()
}

func (c *Client) nudge() {
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

// Run keeps a session open until ctx is done.
func (c *Client) Run(ctx context.Context) error {
	var plan *Plan
	var token string       // the IPAM's resume token for plan ("": none)
	var cutOff time.Time   // when the IPAM was last heard from, once cut off; zero while connected
	var heard atomic.Int64 // unix nanoseconds of the last message from the IPAM
	lost := false
	backoff := firstBackoff
	for attempt := 0; ; attempt++ {
		conn := c.conns[attempt%len(c.conns)]
		err := c.session(ctx, conn, plan, token, func() { heard.Store(time.Now().UnixNano()) }, func(p *Plan, tok string) uint64 {
			// Only a change of L2 addresses makes a new generation: a right
			// granted for a plan that differs from the installed one in its
			// routes alone counts at once, so a slow BGP apply never holds
			// up L2 answers.
			gen := c.gen.Load()
			if plan == nil || gen == 0 || !sameL2(plan.L2, p.L2) {
				gen = c.gen.Add(1)
			}
			plan, token, cutOff, lost = p, tok, time.Time{}, false
			backoff = firstBackoff
			c.publish(Update{Plan: p, Gen: gen})
			return gen
		})
		select {
		case <-ctx.Done():
			return nil
		default:
		}
		if cutOff.IsZero() {
			// The grace period runs from the last word from the IPAM, not
			// from when this node noticed the loss: a node that hung does
			// not get a fresh grace period when it wakes up.
			cutOff = time.Now()
			if h := heard.Load(); h > 0 {
				cutOff = time.Unix(0, h)
			}
		}
		// Jittered: the nodes of a replica that died all notice at once,
		// and spread their reconnects over the whole backoff rather than
		// arriving together at the next replica.
		wait := jitter(backoff)
		c.logger.WarnContext(ctx, "IPAM session ended; reconnecting", "error", err, "wait", wait)
		if !lost && plan != nil {
			wait = min(wait, max(time.Until(cutOff.Add(c.opts.Grace)), 0))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if !lost && plan != nil && time.Since(cutOff) >= c.opts.Grace {
			lost = true
			c.logger.WarnContext(ctx, "cut off from the IPAM past the grace period: dropping the L2 addresses (not answered since the last right ran out)", "grace", c.opts.Grace)
			c.publish(Update{Plan: plan, Gen: c.gen.Load(), Lost: true})
		}
		// While the node still holds its plan (within the grace period), a
		// replica that comes back, or another one, is tried at least every
		// 250 ms: the node answers L2 only once a replica has confirmed its
		// plan, and a replica's farewell right lasts only as long as its
		// lease. Refused connections are cheap; the jitter spreads a fleet
		// (each wait is at most the backoff, so never above 250 ms here).
		limit := c.opts.MaxBackoff
		if !lost && plan != nil {
			limit = min(limit, fastRetry)
		}
		backoff = min(backoff*2, limit)
	}
}

// session runs one subscription until it breaks. When ctx ends, the node's
// rights are closed before the stream is: the IPAM moves the addresses of a
// node that closed its stream at once.
//
// A node that holds a plan sends the resume token that came with it: the
// IPAM then answers with an empty change instead of a snapshot when the
// node's plan has not changed (see SubscribeHello.resume_token), and that
// change confirms the plan the node holds for this session's rights as a
// snapshot would.
func (c *Client) session(ctx context.Context, conn grpc.ClientConnInterface, last *Plan, token string, heard func(), got func(*Plan, string) uint64) error {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		c.opts.Rights.Close()
		cancel()
	})
	defer stop()
	stream, err := ipamv1.NewAnnouncerServiceClient(conn).Subscribe(sctx)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	c.mu.Lock()
	hello := &ipamv1.SubscribeHello{Parent: "tenants/" + c.id.Tenant, Node: c.id.Node, Labels: c.id.Labels, Interfaces: c.interfaces}
	c.mu.Unlock()
	resuming := last != nil && token != ""
	if resuming {
		hello.ResumeToken = token
	}
	var sendMu sync.Mutex
	send := func(m *ipamv1.SubscribeRequest) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(m)
	}
	if err := send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Hello{Hello: hello}}); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	beats := newBeats()
	heartbeat := make(chan time.Duration, 1)
	beatNow := make(chan struct{}, 1)
	errs := make(chan error, 2)
	go func() { errs <- c.sender(sctx, send, beats, heartbeat, beatNow) }()
	go func() {
		plan := last
		var gen uint64 // of the newest plan this session delivered; 0: none yet
		var interval time.Duration
		for {
			resp, err := stream.Recv()
			if err != nil {
				errs <- fmt.Errorf("receive: %w", err)
				return
			}
			heard()
			// Only a change of interval resets the sender's ticker: the IPAM
			// repeats the interval on every message, its own heartbeats
			// included, and resetting on each would stop ours.
			if hb := resp.GetHeartbeatInterval(); hb != nil && hb.AsDuration() != interval {
				interval = hb.AsDuration()
				select {
				case heartbeat <- interval:
				default:
				}
			}
			if ack := resp.GetHeartbeatAck(); ack != nil && gen > 0 && sctx.Err() == nil {
				if sent, ok := beats.acked(ack.GetSequence()); ok && ack.GetValidFor().AsDuration() > 0 {
					c.opts.Rights.Grant(gen, sent.Add(ack.GetValidFor().AsDuration()))
				}
			}
			first := gen == 0
			switch {
			case resp.GetSnapshot() != nil:
				plan = snapshot(resp.GetSnapshot())
			case resp.GetChange() != nil && plan != nil && (!first || resuming):
				// Before this session's first snapshot, a change (the
				// empty one that says the node is current) is taken only
				// when the node resumed: it applies to the plan whose
				// token the node sent.
				plan = plan.apply(resp.GetChange())
			default:
				continue
			}
			if first {
				// Ask for a right for the plan at once rather than at the
				// next tick: after a reconnect the node answers only once
				// it has one.
				select {
				case beatNow <- struct{}{}:
				default:
				}
			}
			gen = got(plan, resp.GetResumeToken())
		}
	}()
	err = <-errs
	cancel()
	return err
}

// fastRetry caps the backoff between reconnects while the node still holds
// its plan.
const fastRetry = 250 * time.Millisecond

// firstBackoff is the backoff of the first reconnect after a session
// that delivered a plan.
const firstBackoff = 100 * time.Millisecond

// jitter returns a wait drawn evenly from [backoff/4, backoff]: at least a
// little, never more than the backoff.
func jitter(backoff time.Duration) time.Duration {
	lo := backoff / 4
	return lo + rand.N(backoff-lo+1)
}

// beats remembers when each heartbeat of a session was sent, until the IPAM
// acknowledges it or a later one.
type beats struct {
	mu   sync.Mutex
	next uint64
	sent map[uint64]time.Time
}

// maxUnacked bounds the heartbeats remembered; older ones are forgotten
// (their acknowledgement grants nothing).
const maxUnacked = 64

func newBeats() *beats { return &beats{sent: make(map[uint64]time.Time)} }

// send numbers a heartbeat about to be sent, remembering when. The time is
// taken before the heartbeat leaves, so a right counted from it ends no
// later than the IPAM assumes.
func (b *beats) send() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	b.sent[b.next] = time.Now()
	delete(b.sent, b.next-maxUnacked)
	return b.next
}

// acked returns when heartbeat seq was sent, and forgets the ones before
// it. It keeps seq itself: a replica that stops acknowledges the newest
// heartbeat it received once more, with a longer right (its farewell).
func (b *beats) acked(seq uint64) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.sent[seq]
	for s := range b.sent {
		if s < seq {
			delete(b.sent, s)
		}
	}
	return t, ok
}

// sender sends heartbeats at the interval the IPAM asks for (and at once
// when asked to), and the node's interfaces and status when they change.
func (c *Client) sender(ctx context.Context, send func(*ipamv1.SubscribeRequest) error, bs *beats, interval <-chan time.Duration, now <-chan struct{}) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var sentStatus *ipamv1.AnnouncerStatus
	var sentItfs []*ipamv1.NetworkInterface
	beat := func() error {
		hb := &ipamv1.Heartbeat{Sequence: bs.send()}
		if err := send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Heartbeat{Heartbeat: hb}}); err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d := <-interval:
			if d > 0 {
				tick.Reset(d)
			}
			continue
		case <-tick.C:
			if err := beat(); err != nil {
				return err
			}
		case <-now:
			if err := beat(); err != nil {
				return err
			}
		case <-c.poke:
		}
		c.mu.Lock()
		st, itfs := c.status, c.interfaces
		c.mu.Unlock()
		if st != nil && st != sentStatus {
			if err := send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Status{Status: st}}); err != nil {
				return fmt.Errorf("status: %w", err)
			}
			sentStatus = st
		}
		if itfs != nil && !sameSlice(itfs, sentItfs) {
			if err := send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Interfaces{Interfaces: &ipamv1.InterfacesUpdate{Interfaces: itfs}}}); err != nil {
				return fmt.Errorf("interfaces: %w", err)
			}
			sentItfs = itfs
		}
	}
}

// noRights keeps no rights.
type noRights struct{}

func (noRights) Grant(uint64, time.Time) {}
func (noRights) Close()                  {}

// sameL2 reports whether two plans answer for the same L2 addresses on the
// same interfaces.
func sameL2(a, b map[netip.Addr][]string) bool {
	return maps.EqualFunc(a, b, slices.Equal)
}

func sameSlice[T any](a, b []*T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
