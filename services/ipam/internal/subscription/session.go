package subscription

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/planner"
)

// ReportInterval is the shortest time between two writes of one node's
// status and interface reports.
const ReportInterval = 250 * time.Millisecond

var (
	// ErrNodeEnded marks a session that the announcer's side ended: its
	// stream was closed or its connection broke. An announcer gives up its
	// L2 rights before it closes its stream, and a dead one answers
	// nothing, so its addresses may move at once. Run returns nil then.
	ErrNodeEnded = errors.New("the announcer ended its stream")
	// ErrStopping ends the sessions of a replica that is stopping.
	ErrStopping = errors.New("this IPAM replica is stopping: reconnect")
	// ErrNoHeartbeat ends the session of an announcer that sent nothing
	// for three heartbeat intervals.
	ErrNoHeartbeat = errors.New("no heartbeat")
	// ErrRefused marks a Stream.Recv error that is a refusal of what the
	// announcer sent by the layer in front of the session (the access
	// guard: a hello for another node or tenant). Run returns it, wrapped
	// as the stream gave it, so that the announcer hears why.
	ErrRefused = errors.New("the announcer's message was refused")
	// ErrTakenOver ends a session whose node's registration another
	// session wrote since (the node reconnected, here or to another
	// replica, before this one noticed it had gone).
	ErrTakenOver = errors.New("the node's registration was taken over by its next session")
)

// Plans yields one node's plan as it changes.
type Plans interface {
	// Next blocks until the node's plan differs from what it was sent,
	// and returns either the whole plan (the first time, unless the node
	// holds it already: then an empty change) or the change; ok is false
	// when ctx is done.
	Next(ctx context.Context) (snapshot *ipam.NodePlan, change *planner.Delta, ok bool)
	// Plan is the plan the node was last sent (or holds): the one Next
	// last returned or confirmed.
	Plan() *ipam.NodePlan
}

// Feed hands subscribed nodes their plans.
type Feed interface {
	// Subscribe attaches a node; detach forgets it. holds, if not nil,
	// says whether a plan is the one the node already holds (it resumes):
	// the node is then sent no snapshot but an empty change.
	Subscribe(tenant, node string, holds func(*ipam.NodePlan) bool) (plans Plans, detach func())
}

// Message is one message of the announcer, converted and validated by the
// stream. Exactly one field is set, or none for a message of a kind this
// replica does not know (it still counts as a sign of life).
type Message struct {
	// Hello is the first message: the node's registration (Tenant, Name,
	// Labels and Interfaces).
	Hello *ipam.Node
	// ResumeToken is the hello's resume token: what the node says it
	// holds (see Token). Any value is accepted: one that does not match
	// gets a snapshot.
	ResumeToken string
	// Heartbeat is a heartbeat; a numbered one is acknowledged.
	Heartbeat *Heartbeat
	// Status is the node's status report.
	Status *Status
	// Interfaces is the node's interface report.
	Interfaces *Interfaces
}

// Heartbeat is a sign of life; a Sequence above 0 asks for an Ack.
type Heartbeat struct{ Sequence uint64 }

// Status is what a node reports it announces, its BGP sessions, and the
// L2 conflicts it sees.
type Status struct {
	Announced []ipam.AnnouncedAddr
	Sessions  []ipam.SessionStatus
	Conflicts []ipam.AddrConflict
}

// Interfaces is a node's report of its network interfaces.
type Interfaces struct{ List []ipam.Interface }

// Update is one plan message to the node: its whole plan (Snapshot, the
// first time) or a change (an empty one, first, when the node resumed a
// plan it holds). Token identifies the node's plan after it, for the node
// to resume with (see Token).
type Update struct {
	Tenant, Node string
	Snapshot     *ipam.NodePlan
	Change       *planner.Delta
	Token        string
}

// Ack acknowledges a numbered heartbeat and grants the node its L2 right
// for ValidFor from when it sent it (see HeartbeatAck in the API).
type Ack struct {
	Sequence uint64
	ValidFor time.Duration
}

// Stream is the announcer's end of the session.
type Stream interface {
	// Recv returns the announcer's next message. An error that is an
	// ipam.FieldErrors or *ipam.FieldError (an invalid message) ends the
	// session with it; any other error means the announcer ended its
	// stream.
	Recv() (Message, error)
	// SendUpdate sends a plan message.
	SendUpdate(u Update) error
	// SendHeartbeat sends a heartbeat, acknowledging one of the node's
	// if ack is not nil.
	SendHeartbeat(ack *Ack) error
}

// Config is what sessions share.
type Config struct {
	// Leases hands the session the replica's lease (see ReplicaLease).
	Leases Leases
	Feed   Feed
	// Heartbeat is how often announcers must send heartbeats, and how
	// often they are sent one; three missed end the session.
	Heartbeat time.Duration
	// Stopping is closed when the replica stops: sessions end with
	// ErrStopping and leave their registrations to expire with the
	// replica's lease.
	Stopping <-chan struct{}
	Logger   *slog.Logger
}

// Session is one announcer's session.
type Session struct {
	cfg    Config
	stream Stream

	sendMu sync.Mutex

	nodeMu sync.Mutex
	node   *ipam.Node // the registration, as last reported
}

// New returns a session over a stream; Run runs it.
func New(cfg Config, stream Stream) *Session {
	return &Session{cfg: cfg, stream: stream}
}

// Run runs the session until it ends: its error is why, or nil when the
// announcer ended it (its stream closed or its connection broke) or ctx
// was canceled. Run returns without waiting for the Recv it may still be
// blocked in: that one returns when the caller ends the stream, which it
// must do once Run returns. An announcer that hangs with its connection up
// (the very case the watchdog is for) never unblocks it, while one that
// keeps sending heartbeats would keep it looping; either way the session
// would outlive its lease and stay registered nowhere.
func (s *Session) Run(ctx context.Context) error {
	first, err := s.stream.Recv()
	if err != nil {
		if invalid(err) || errors.Is(err, ErrRefused) {
			return err
		}
		s.cfg.Logger.InfoContext(ctx, "announcer ended its stream before its hello", "reason", err)
		return nil
	}
	if first.Hello == nil {
		var fes ipam.FieldErrors
		fes.Add("hello", "the first message must be a hello")
		return fes
	}
	h := first.Hello
	s.node = &ipam.Node{Tenant: h.Tenant, Name: h.Name, Labels: h.Labels, Interfaces: h.Interfaces, Live: true, ConnectTime: time.Now()}
	held, resuming := parseToken(first.ResumeToken)
	lease, reg, err := s.register(ctx)
	if err != nil {
		return err
	}
	granted := newRights(2*s.cfg.Heartbeat, lease)
	var ended error // why the session ended, once it has
	defer func() { s.release(ctx, lease, reg, granted, ended) }()
	var holds func(*ipam.NodePlan) bool
	if resuming {
		holds = func(p *ipam.NodePlan) bool { return digestOf(p) == held }
	}
	plans, detach := s.cfg.Feed.Subscribe(s.node.Tenant, s.node.Name, holds)
	defer detach()
	s.cfg.Logger.InfoContext(ctx, "announcer subscribed", "tenant", s.node.Tenant, "node", s.node.Name, "resuming", resuming)

	g, gctx := errgroup.WithContext(ctx)
	beats := make(chan struct{}, 1)
	dirty := make(chan struct{}, 1)
	acks := make(chan uint64, 1) // the newest heartbeat to acknowledge
	var lastSeq atomic.Uint64    // the newest numbered heartbeat received
	g.Go(func() error {
		// Through an etcd election the replica's lease is kept, not given
		// up (see ReplicaLease): the node's rights stop at what is known
		// of the lease's life (see rights), and resume with the same
		// registration once etcd answers, so no address moves.
		select {
		case <-gctx.Done():
			return nil
		case <-lease.Done():
			return lease.Err()
		}
	})
	g.Go(func() error { return s.writeReports(gctx, reg, dirty) })
	g.Go(func() error { return s.farewell(gctx, granted, &lastSeq) })
	g.Go(func() error { return s.watchdog(gctx, beats) })
	g.Go(func() error { return s.receive(beats, dirty, acks, &lastSeq) })
	g.Go(func() error { return s.sendPlans(gctx, plans) })
	g.Go(func() error { return s.sendHeartbeats(gctx, granted, acks) })
	// The session ends when any part of it does. Not g.Wait: see Run's
	// doc comment.
	<-gctx.Done()
	ended = context.Cause(gctx)
	s.cfg.Logger.InfoContext(ctx, "announcer session ended", "tenant", s.node.Tenant, "node", s.node.Name, "reason", ended)
	if errors.Is(ended, context.Canceled) || errors.Is(ended, ErrNodeEnded) {
		return nil
	}
	return ended
}

// register writes the node's registration tied to the replica's lease,
// taking it over from whichever session wrote it before (the node's
// session on a replica that died or stopped, whose lease has not expired
// yet, or one that has not noticed yet that the node left): a resume costs
// etcd one write and no lease grant. The registration is the node's own,
// whatever the resume token says: a token names a plan, never a
// registration.
func (s *Session) register(ctx context.Context) (Lease, Registration, error) {
	lease, err := s.cfg.Leases.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	reg := lease.Tie(s.nodeRef())
	s.nodeMu.Lock()
	_, err = reg.Take(ctx, s.node)
	s.nodeMu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	return lease, reg, nil
}

func (s *Session) nodeRef() ipam.Ref {
	return ipam.Ref{Kind: ipam.KindNode, ID: s.node.Tenant + "/" + s.node.Name}
}

// releaseTry bounds each attempt to delete the registration.
const releaseTry = 2 * time.Second

// release ends the node's registration: it is deleted, after the last L2
// right granted has run out unless the node ended the session itself, or
// left to expire with the replica's lease when the replica is stopping.
// The deletion is retried while etcd does not answer: the replica's lease
// outlives the session, so a registration left behind would stay. It
// stops when the lease is lost (the registration goes with it), when the
// replica stops, or when the node's next session took the registration
// over.
func (s *Session) release(ctx context.Context, lease Lease, reg Registration, granted *rights, ended error) {
	select {
	case <-s.cfg.Stopping:
		s.cfg.Logger.InfoContext(ctx, "replica stopping: registration left to expire with the replica's lease unless the announcer reconnects", "node", s.node.Name, "ttl", LeaseTTL)
		return
	case <-lease.Done():
		// The replica stopped keeping its lease alive without a graceful
		// stop first (its storage gave up): as a stopping replica does.
		if errors.Is(lease.Err(), ErrStopping) {
			s.cfg.Logger.InfoContext(ctx, "replica lease no longer kept alive: registration left to expire with it unless the announcer reconnects", "node", s.node.Name, "ttl", LeaseTTL)
			return
		}
	default:
	}
	// ctx ends when the announcer cancels its call or its connection
	// closes (a killed process's kernel closes it): the node ended the
	// session.
	if !errors.Is(ended, ErrNodeEnded) && ctx.Err() == nil {
		// The node may still be answering on the rights it was granted:
		// its addresses move only once they have ended. A node that closed
		// its own stream gave its rights up first.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTry)
		granted.wait(wctx)
		cancel()
	}
	backoff := 100 * time.Millisecond
	for {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTry)
		err := reg.Delete(rctx)
		cancel()
		switch {
		case err == nil:
			return
		case errors.Is(err, ipam.ErrConflict):
			s.cfg.Logger.InfoContext(ctx, "node registration taken over by the node's next session (or gone with the lease): left to it", "node", s.node.Name)
			return
		}
		s.cfg.Logger.WarnContext(ctx, "deleting the node's registration failed; retrying", "node", s.node.Name, "error", err)
		select {
		case <-lease.Done():
			return
		case <-s.cfg.Stopping:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// publish writes the node's registration, with its latest reports, if it
// is still as this session last wrote it.
func (s *Session) publish(ctx context.Context, reg Registration) error {
	s.nodeMu.Lock()
	defer s.nodeMu.Unlock()
	_, err := reg.Put(ctx, s.node)
	return err
}

// markDirty asks writeReports to write the registration.
func markDirty(dirty chan<- struct{}) {
	select {
	case dirty <- struct{}{}:
	default:
	}
}

// writeReports writes status and interface reports when they change, and
// at most once per ReportInterval: a node cannot make the IPAM write to
// etcd faster than that. A failed write is retried, not session-ending.
func (s *Session) writeReports(ctx context.Context, reg Registration, dirty chan struct{}) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-dirty:
		}
		if err := s.publish(ctx, reg); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, ipam.ErrConflict) {
				// The node's next session wrote the registration (or it
				// went with a lost lease, which ends the session too).
				return fmt.Errorf("%w: %w", ErrTakenOver, err)
			}
			// etcd is out of reach (an election, most often): the report
			// is written once it answers again. A lost lease ends the
			// session through ReplicaLease, not here.
			s.cfg.Logger.WarnContext(ctx, "writing the node's report failed; retrying", "tenant", s.node.Tenant, "node", s.node.Name, "error", err)
			markDirty(dirty)
		}
		t.Reset(ReportInterval)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// farewell ends the session when the replica stops. The registration is
// left to expire with the replica's lease: nobody moves the node's
// addresses before it does, so the node may answer until then, through a
// restart of this replica that is over before it.
func (s *Session) farewell(ctx context.Context, granted *rights, lastSeq *atomic.Uint64) error {
	select {
	case <-ctx.Done():
		return nil
	case <-s.cfg.Stopping:
	}
	if seq := lastSeq.Load(); seq > 0 {
		d := granted.farewell(time.Now())
		s.cfg.Logger.InfoContext(ctx, "replica stopping: granting the node its L2 right until its lease may expire", "node", s.node.Name, "right", d)
		_ = s.send(func() error { return s.stream.SendHeartbeat(&Ack{Sequence: seq, ValidFor: d}) })
	}
	return ErrStopping
}

// watchdog ends the session when nothing came for three heartbeats.
func (s *Session) watchdog(ctx context.Context, beats <-chan struct{}) error {
	limit := 3 * s.cfg.Heartbeat
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-beats:
			t.Reset(limit)
		case <-t.C:
			return fmt.Errorf("%w for %s", ErrNoHeartbeat, limit)
		}
	}
}

// invalid reports whether err is a validation error of a message.
func invalid(err error) bool {
	var fes ipam.FieldErrors
	var fe *ipam.FieldError
	return errors.As(err, &fes) || errors.As(err, &fe)
}

// receive handles what the announcer sends until its stream ends.
func (s *Session) receive(beats, dirty chan struct{}, acks chan uint64, lastSeq *atomic.Uint64) error {
	for {
		msg, err := s.stream.Recv()
		if err != nil {
			if invalid(err) || errors.Is(err, ErrRefused) {
				return err
			}
			return fmt.Errorf("%w: %w", ErrNodeEnded, err)
		}
		select {
		case beats <- struct{}{}:
		default:
		}
		changed := false
		switch {
		case msg.Heartbeat != nil:
			if seq := msg.Heartbeat.Sequence; seq > 0 {
				lastSeq.Store(seq)
				select { // replace an older one not yet sent
				case <-acks:
				default:
				}
				acks <- seq
			}
		case msg.Status != nil:
			st := msg.Status
			s.nodeMu.Lock()
			changed = !reflect.DeepEqual(s.node.Announced, st.Announced) || !reflect.DeepEqual(s.node.Sessions, st.Sessions) ||
				!reflect.DeepEqual(s.node.Conflicts, st.Conflicts)
			s.node.Announced, s.node.Sessions, s.node.Conflicts = st.Announced, st.Sessions, st.Conflicts
			s.nodeMu.Unlock()
		case msg.Interfaces != nil:
			s.nodeMu.Lock()
			changed = !reflect.DeepEqual(s.node.Interfaces, msg.Interfaces.List)
			s.node.Interfaces = msg.Interfaces.List
			s.nodeMu.Unlock()
		}
		if changed {
			markDirty(dirty)
		}
	}
}

// send sends one message at a time on the stream.
func (s *Session) send(fn func() error) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return fn()
}

// sendPlans streams the node its plan: a snapshot, then changes.
func (s *Session) sendPlans(ctx context.Context, plans Plans) error {
	var tok tokens
	for {
		snap, delta, ok := plans.Next(ctx)
		if !ok {
			return nil
		}
		u := Update{Tenant: s.node.Tenant, Node: s.node.Name, Snapshot: snap, Change: delta, Token: tok.next(plans.Plan(), snap, delta)}
		if err := s.send(func() error { return s.stream.SendUpdate(u) }); err != nil {
			return err
		}
	}
}

// sendHeartbeats sends a heartbeat every interval, and acknowledges the
// node's numbered heartbeats, which grants it its L2 rights.
func (s *Session) sendHeartbeats(ctx context.Context, granted *rights, acks <-chan uint64) error {
	t := time.NewTicker(s.cfg.Heartbeat)
	defer t.Stop()
	for {
		var ack *Ack
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case seq := <-acks:
			// Sent after every plan message before it on the stream: the
			// right covers what the node was sent so far.
			ack = &Ack{Sequence: seq, ValidFor: granted.grant(time.Now())}
		}
		if err := s.send(func() error { return s.stream.SendHeartbeat(ack) }); err != nil {
			return err
		}
	}
}
