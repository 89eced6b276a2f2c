// Package ipamclient is the announcer's session with the IPAM: it
// subscribes with the node's identity, sends heartbeats and status, keeps
// the node's plan from the snapshot and changes it receives, and reconnects
// with backoff to any of several IPAM endpoints. When it has been cut off
// from every IPAM for longer than the grace period it says so, so that the
// node stops answering L2 for addresses another node may now own.
package ipamclient

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
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

// Options tunes a Client.
type Options struct {
	// Grace is how long the node keeps announcing its L2 addresses while
	// cut off from every IPAM (default 2 s: the IPAM's node lease).
	Grace time.Duration
	// MaxBackoff caps the wait between reconnects (default 2 s).
	MaxBackoff time.Duration
}

// Update is the plan to announce now; Lost is set when the node has been
// cut off longer than the grace period (announce no L2 then).
type Update struct {
	Plan *Plan
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
}

// New returns a Client over connections to IPAM replicas (tried in turn).
func New(conns []grpc.ClientConnInterface, id Identity, logger *slog.Logger, opts Options) *Client {
	if opts.Grace <= 0 {
		opts.Grace = 2 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 2 * time.Second
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
	var cutOff time.Time   // when the IPAM was last heard from, once cut off; zero while connected
	var heard atomic.Int64 // unix nanoseconds of the last message from the IPAM
	lost := false
	backoff := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		conn := c.conns[attempt%len(c.conns)]
		err := c.session(ctx, conn, plan, func() { heard.Store(time.Now().UnixNano()) }, func(p *Plan) {
			plan, cutOff, lost = p, time.Time{}, false
			backoff = 50 * time.Millisecond
			c.publish(Update{Plan: p})
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
		c.logger.WarnContext(ctx, "IPAM session ended; reconnecting", "error", err, "backoff", backoff)
		wait := backoff + rand.N(backoff/2+1)
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
			c.logger.WarnContext(ctx, "cut off from the IPAM past the grace period: stopping L2 answers", "grace", c.opts.Grace)
			c.publish(Update{Plan: plan, Lost: true})
		}
		backoff = min(backoff*2, c.opts.MaxBackoff)
	}
}

// session runs one subscription until it breaks.
func (c *Client) session(ctx context.Context, conn grpc.ClientConnInterface, last *Plan, heard func(), got func(*Plan)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := ipamv1.NewAnnouncerServiceClient(conn).Subscribe(ctx)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	c.mu.Lock()
	hello := &ipamv1.SubscribeHello{Parent: "tenants/" + c.id.Tenant, Node: c.id.Node, Labels: c.id.Labels, Interfaces: c.interfaces}
	c.mu.Unlock()
	var sendMu sync.Mutex
	send := func(m *ipamv1.SubscribeRequest) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(m)
	}
	if err := send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Hello{Hello: hello}}); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	heartbeat := make(chan time.Duration, 1)
	errs := make(chan error, 2)
	go func() { errs <- c.sender(ctx, send, heartbeat) }()
	go func() {
		plan := last
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
			switch {
			case resp.GetSnapshot() != nil:
				plan = snapshot(resp.GetSnapshot())
			case resp.GetChange() != nil && plan != nil:
				plan = plan.apply(resp.GetChange())
			default:
				continue
			}
			got(plan)
		}
	}()
	err = <-errs
	cancel()
	return err
}

// sender sends heartbeats at the interval the IPAM asks for, and the
// node's interfaces and status when they change.
func (c *Client) sender(ctx context.Context, send func(*ipamv1.SubscribeRequest) error, interval <-chan time.Duration) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var sentStatus *ipamv1.AnnouncerStatus
	var sentItfs []*ipamv1.NetworkInterface
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
			if err := send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Heartbeat{Heartbeat: &ipamv1.Heartbeat{}}}); err != nil {
				return fmt.Errorf("heartbeat: %w", err)
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
