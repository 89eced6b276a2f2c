package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
	"google.golang.org/protobuf/proto"
)

// ErrNotRunning is returned by calls that need GoBGP while Run is not
// serving.
var ErrNotRunning = errors.New("bgp: speaker is not running")

// Speaker reconciles desired peers and routes into GoBGP. Create it with
// New, call Run once, and Apply desired states at any time (before Run too:
// the last one is applied when Run starts).
type Speaker struct {
	logger *slog.Logger
	opts   Options
	events chan struct{}
	// refresh asks Run to read what the peers are sent (a session came
	// up).
	refresh chan struct{}
	mute    atomic.Bool // silences GoBGP's log during a deliberate second stop

	mu            sync.Mutex // serializes Apply and Run's start and stop
	started       bool
	srv           *server.BgpServer // set while Run serves
	desired       plan
	applied       plan // what GoBGP holds now
	appliedPolicy *api.SetPoliciesRequest

	sessions sessionTable
	resets   *bfdResets
}

// New returns a Speaker that logs to logger. It starts nothing.
func New(logger *slog.Logger, opts Options) *Speaker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Speaker{
		logger:   logger,
		opts:     opts.withDefaults(),
		events:   make(chan struct{}, 1),
		refresh:  make(chan struct{}, 1),
		desired:  emptyPlan(),
		applied:  emptyPlan(),
		sessions: sessionTable{byName: map[string]*SessionState{}, nameByAddr: map[netip.Addr]string{}},
		resets:   newBFDResets(),
	}
}

// Events is signalled (without blocking, so several changes may coalesce into
// one signal) whenever what Sessions returns changes.
func (s *Speaker) Events() <-chan struct{} { return s.events }

func (s *Speaker) signal() {
	select {
	case s.events <- struct{}{}:
	default:
	}
}

// Run starts GoBGP and serves until ctx is done. Then it withdraws every
// route and closes every session with a Cease, or, with
// Options.KeepRoutesOnExit, closes sessions without a NOTIFICATION so
// graceful-restart peers keep the routes. Run may be called once.
func (s *Speaker) Run(ctx context.Context) error {
	if !s.opts.RouterID.Is4() {
		return fmt.Errorf("bgp: router ID %q is not an IPv4 address", s.opts.RouterID)
	}
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("bgp: Run called twice")
	}
	s.started = true
	s.mu.Unlock()

	// The tap sees GoBGP's BFD resets (see bfdreset.go).
	glog := slog.New(resetTap{levelHandler{min: s.opts.GoBGPLogLevel, mute: &s.mute, Handler: s.logger.Handler()}, s.resets}).With("component", "gobgp")
	srv := server.NewBgpServer(server.LoggerOption(glog, nil))
	serveDone := make(chan struct{})
	go func() {
		defer close(serveDone)
		srv.Serve()
	}()
	policy, err := s.start(ctx, srv)
	if err != nil {
		srv.Stop()
		<-serveDone
		return err
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	if err := srv.WatchEvent(watchCtx, server.WatchEventMessageCallbacks{OnPeerUpdate: s.onPeerEvent}, server.WatchPeer()); err != nil {
		srv.Stop()
		<-serveDone
		return fmt.Errorf("bgp: watch peer events: %w", err)
	}

	s.mu.Lock()
	s.srv = srv
	s.appliedPolicy = policy
	if err := s.reconcileLocked(ctx, srv, s.desired); err != nil {
		s.logger.Warn("bgp: initial desired state applied in part", "err", err)
	}
	s.mu.Unlock()
	s.logger.Info("bgp speaker running", "router_id", s.opts.RouterID, "listen_port", s.opts.ListenPort)

	tick := time.NewTicker(s.opts.PollInterval)
	defer tick.Stop()
	var recheck <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return s.shutdown(srv, serveDone)
		case <-serveDone:
			return errors.New("bgp: GoBGP stopped serving")
		case <-tick.C:
			s.poll(ctx, srv)
		case <-s.resets.wake:
			if s.recreateReset(ctx, srv) && recheck == nil {
				recheck = time.After(resetRetry)
			}
		case <-recheck:
			recheck = nil
			if s.recreateReset(ctx, srv) {
				recheck = time.After(resetRetry)
			}
		case <-s.refresh:
			s.refreshPrefixes(ctx, srv)
		}
	}
}

// start configures a serving GoBGP: global settings, the policies (for an
// empty desired state, which it returns) and their global assignments.
func (s *Speaker) start(ctx context.Context, srv *server.BgpServer) (*api.SetPoliciesRequest, error) {
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn:        s.opts.ASN,
		RouterId:   s.opts.RouterID.String(),
		ListenPort: s.opts.ListenPort,
	}}); err != nil {
		return nil, fmt.Errorf("bgp: start: %w", err)
	}
	req := policies(emptyPlan())
	if err := srv.SetPolicies(ctx, req); err != nil {
		return nil, fmt.Errorf("bgp: set policies: %w", err)
	}
	for _, a := range []struct {
		dir  api.PolicyDirection
		name string
	}{{api.PolicyDirection_POLICY_DIRECTION_IMPORT, importPolicy}, {api.PolicyDirection_POLICY_DIRECTION_EXPORT, exportPolicy}} {
		if err := srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
			Name:          "global",
			Direction:     a.dir,
			Policies:      []*api.Policy{{Name: a.name}},
			DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
		}}); err != nil {
			return nil, fmt.Errorf("bgp: assign %s: %w", a.name, err)
		}
	}
	return req, nil
}

func (s *Speaker) shutdown(srv *server.BgpServer, serveDone <-chan struct{}) error {
	s.mu.Lock()
	s.srv = nil
	s.mu.Unlock()
	ctx := context.Background()
	var err error
	if s.opts.KeepRoutesOnExit {
		// Sessions with graceful restart close without a NOTIFICATION: the
		// peers keep the routes as stale for the restart time.
		if e := srv.StopBgp(ctx, &api.StopBgpRequest{AllowGracefulRestart: true}); e != nil {
			err = fmt.Errorf("bgp: stop keeping routes: %w", e)
		}
		// Stop also ends GoBGP's BFD server; its own StopBgp then fails
		// (already stopped) and would log that as an error.
		s.mute.Store(true)
		srv.Stop()
		s.logger.Info("bgp speaker stopped, routes left to graceful restart")
	} else {
		if e := srv.DeletePath(apiutil.DeletePathRequest{DeleteAll: true}); e != nil {
			err = fmt.Errorf("bgp: withdraw all: %w", e)
		}
		srv.Stop()
		s.logger.Info("bgp speaker stopped, routes withdrawn")
	}
	<-serveDone
	s.sessions.allIdle(time.Now())
	s.signal()
	return err
}

// Apply makes peers and routes the desired state: it adds, re-creates (on
// any setting change) and deletes peers, and advertises each route only to
// its peer with its own attributes, withdrawing what is no longer desired.
// It is idempotent. What cannot work is refused (the returned error names
// each refusal, wrapping ErrInvalidPeer, ErrUnknownPeer, ...) and the rest
// is applied. Before Run, the state is kept and applied when Run starts.
func (s *Speaker) Apply(ctx context.Context, peers []PeerConfig, routes []Route) error {
	next, verr := newPlan(s.opts, peers, routes)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.desired = next
	s.sessions.configure(next)
	s.signal()
	if s.srv == nil {
		return verr
	}
	err := s.reconcileLocked(ctx, s.srv, next)
	s.refreshPrefixesLocked(ctx, s.srv)
	return errors.Join(verr, err)
}

// reconcileLocked moves GoBGP from s.applied to next. The order matters:
// peers that go or change go first; the policies are replaced before any
// path is added, so a new path is exported under rules that already know
// it; new peers come after the paths, so their first update carries the
// full table; soft resets last.
func (s *Speaker) reconcileLocked(ctx context.Context, srv *server.BgpServer, next plan) error {
	old := s.applied.clone()
	var errs []error

	for name, pc := range old.peers {
		if npc, keep := next.peers[name]; keep && samePeer(pc, npc) {
			continue
		}
		if err := srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: pc.Address.String()}); err != nil {
			errs = append(errs, fmt.Errorf("delete peer %q: %w", name, err))
			continue
		}
		delete(s.applied.peers, name)
		s.logger.Info("bgp peer removed", "peer", name, "address", pc.Address)
	}

	if req := policies(next); !proto.Equal(req, s.appliedPolicy) {
		if err := srv.SetPolicies(ctx, req); err != nil {
			errs = append(errs, fmt.Errorf("set policies: %w", err))
		} else {
			s.appliedPolicy = req
		}
	}

	var add []netip.Prefix
	for prefix := range next.adverts {
		if _, ok := s.applied.adverts[prefix]; !ok {
			add = append(add, prefix)
		}
	}
	slices.SortFunc(add, comparePrefix)
	for _, prefix := range add {
		path, err := localPath(prefix)
		if err == nil {
			_, err = srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{path}})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("add path %s: %w", prefix, err))
			continue
		}
		s.applied.adverts[prefix] = nil
	}

	for name, pc := range next.peers {
		if _, ok := s.applied.peers[name]; ok {
			continue
		}
		if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(pc)}); err != nil {
			errs = append(errs, fmt.Errorf("add peer %q: %w", name, err))
			continue
		}
		s.applied.peers[name] = pc
		s.logger.Info("bgp peer added", "peer", name, "address", pc.Address, "asn", pc.PeerASN)
		if pc.BFD != nil && pc.BFD.Passive {
			s.logger.Warn("bgp: BFD passive mode is not supported by GoBGP; the session runs active", "peer", name)
		}
	}

	var del []netip.Prefix
	for prefix := range s.applied.adverts {
		if _, ok := next.adverts[prefix]; !ok {
			del = append(del, prefix)
		}
	}
	slices.SortFunc(del, comparePrefix)
	for _, prefix := range del {
		path, err := localPath(prefix)
		if err == nil {
			err = srv.DeletePath(apiutil.DeletePathRequest{Paths: []*apiutil.Path{path}})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("withdraw %s: %w", prefix, err))
			continue
		}
		delete(s.applied.adverts, prefix)
	}
	for prefix := range s.applied.adverts {
		if byPeer, ok := next.adverts[prefix]; ok {
			s.applied.adverts[prefix] = byPeer
		}
	}

	for _, name := range needsSoftReset(old, s.applied) {
		pc := s.applied.peers[name]
		if err := srv.ResetPeer(ctx, &api.ResetPeerRequest{
			Address: pc.Address.String(), Soft: true, Direction: api.ResetPeerRequest_DIRECTION_OUT,
		}); err != nil {
			errs = append(errs, fmt.Errorf("soft reset %q: %w", name, err))
		}
	}
	s.sessions.setAddresses(s.applied)
	if len(errs) > 0 {
		return fmt.Errorf("bgp: apply: %w", errors.Join(errs...))
	}
	return nil
}

// Learned counts the paths learned from peers in the speaker's own table.
// The import policy keeps it at zero; a learned leftover is how a withdrawn
// address can stay alive (the stale-route trap).
func (s *Speaker) Learned(_ context.Context) (int, error) {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return 0, ErrNotRunning
	}
	n := 0
	for _, f := range []bgp.Family{bgp.RF_IPv4_UC, bgp.RF_IPv6_UC} {
		err := srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: f}, func(_ bgp.NLRI, paths []*apiutil.Path) {
			for _, p := range paths {
				if p.PeerAddress.IsValid() && !p.PeerAddress.IsUnspecified() {
					n++
				}
			}
		})
		if err != nil {
			return 0, fmt.Errorf("bgp: list paths: %w", err)
		}
	}
	return n, nil
}

func (p plan) clone() plan {
	c := emptyPlan()
	for k, v := range p.peers {
		c.peers[k] = v
	}
	for k, v := range p.adverts {
		c.adverts[k] = v
	}
	return c
}
