package bgp

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// sessionTable is the snapshot Sessions returns: one entry per desired peer,
// updated by GoBGP's peer events (at once) and by Run's poll (BFD state and
// counters).
type sessionTable struct {
	mu         sync.Mutex
	byName     map[string]*SessionState
	nameByAddr map[netip.Addr]string
}

// Sessions returns the state of every desired peer's session, sorted by
// peer name.
func (s *Speaker) Sessions() []SessionState {
	t := &s.sessions
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]SessionState, 0, len(t.byName))
	for _, st := range t.byName {
		c := *st
		c.Prefixes = slices.Clone(st.Prefixes)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b SessionState) int { return strings.Compare(a.Peer, b.Peer) })
	return out
}

// configure keeps one entry per peer of p: new peers start idle, dropped
// peers disappear.
func (t *sessionTable) configure(p plan) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	for name := range t.byName {
		if _, ok := p.peers[name]; !ok {
			delete(t.byName, name)
		}
	}
	for name := range p.peers {
		if _, ok := t.byName[name]; !ok {
			t.byName[name] = &SessionState{Peer: name, State: StateIdle, Since: now}
		}
	}
}

// setAddresses records which address is which peer in GoBGP now; a peer
// that was re-created starts over as idle.
func (t *sessionTable) setAddresses(applied plan) {
	t.mu.Lock()
	defer t.mu.Unlock()
	next := make(map[netip.Addr]string, len(applied.peers))
	for name, pc := range applied.peers {
		next[pc.Address] = name
	}
	t.nameByAddr = next
}

func (t *sessionTable) allIdle(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, st := range t.byName {
		if st.State != StateIdle || st.BFDUp || st.Advertised != 0 || st.Received != 0 || len(st.Prefixes) > 0 {
			*st = SessionState{Peer: st.Peer, State: StateIdle, Since: now}
		}
	}
	t.nameByAddr = map[netip.Addr]string{}
}

// onPeerEvent is GoBGP's callback for peer state changes (on GoBGP's watch
// goroutine): it must not block.
func (s *Speaker) onPeerEvent(ev *apiutil.WatchEventMessage_PeerEvent, at time.Time) {
	if ev.Type != apiutil.PEER_EVENT_STATE {
		return
	}
	addr := ev.Peer.State.NeighborAddress
	state := fsmStateName(ev.Peer.State.SessionState)
	t := &s.sessions
	t.mu.Lock()
	name, ok := t.nameByAddr[addr]
	var st *SessionState
	if ok {
		st = t.byName[name]
	}
	changed := st != nil && st.State != state
	var was string
	if changed {
		was = st.State
		st.State = state
		st.Since = at
		if state != StateEstablished {
			st.Advertised, st.Received, st.Prefixes = 0, 0, nil
		}
	}
	t.mu.Unlock()
	if !changed {
		return
	}
	if state == StateEstablished {
		// What the peer is sent is read from GoBGP, which this callback
		// must not wait for: Run does it.
		select {
		case s.refresh <- struct{}{}:
		default:
		}
	}
	level := slog.LevelInfo
	attrs := []any{"peer", name, "address", addr, "state", state, "was", was}
	if was == StateEstablished && ev.Peer.State.DisconnectReason != api.PeerState_DISCONNECT_REASON_UNSPECIFIED {
		// Lost, not deconfigured (a peer GoBGP deletes goes down without
		// a reason).
		level = slog.LevelWarn
		attrs = append(attrs, "reason", ev.Peer.State.DisconnectMessage)
	}
	s.logger.Log(context.Background(), level, "bgp session state", attrs...)
	s.signal()
}

// poll refreshes BFD states and counters from GoBGP.
func (s *Speaker) poll(ctx context.Context, srv *server.BgpServer) {
	type info struct {
		state                string
		bfdUp                bool
		advertised, received int
	}
	got := map[netip.Addr]info{}
	err := srv.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		if p.State == nil {
			return
		}
		addr, err := netip.ParseAddr(p.State.NeighborAddress)
		if err != nil {
			return
		}
		in := info{state: apiStateName(p.State.SessionState)}
		if b := p.State.BfdState; b != nil {
			in.bfdUp = b.SessionState == api.BfdSessionState_BFD_SESSION_STATE_UP
		}
		for _, af := range p.AfiSafis {
			if af.State != nil {
				in.advertised += int(af.State.Advertised)
				in.received += int(af.State.Received)
			}
		}
		got[addr] = in
	})
	if err != nil {
		s.logger.Debug("bgp: list peers", "err", err)
		return
	}
	t := &s.sessions
	t.mu.Lock()
	changed, stale := false, false
	now := time.Now()
	for addr, in := range got {
		name, ok := t.nameByAddr[addr]
		if !ok {
			continue
		}
		st := t.byName[name]
		if st == nil {
			continue
		}
		if st.State != in.state {
			st.State, st.Since = in.state, now
			changed = true
		}
		if st.BFDUp != in.bfdUp || st.Advertised != in.advertised || st.Received != in.received {
			st.BFDUp, st.Advertised, st.Received = in.bfdUp, in.advertised, in.received
			changed = true
		}
		if st.State == StateEstablished && len(st.Prefixes) != st.Advertised {
			stale = true
		}
	}
	t.mu.Unlock()
	if stale {
		// GoBGP counts other prefixes than it listed last: list again.
		s.refreshPrefixes(ctx, srv)
	}
	if changed {
		s.signal()
	}
}

// refreshPrefixes reads from GoBGP the prefixes each established session is
// sent (its adj-RIB-out) and signals Events if any changed.
func (s *Speaker) refreshPrefixes(ctx context.Context, srv *server.BgpServer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refreshPrefixesLocked(ctx, srv) {
		s.signal()
	}
}

// refreshPrefixesLocked is refreshPrefixes with s.mu held (so that no Apply
// changes GoBGP between the listing and its recording); it reports whether
// any session's prefixes changed.
func (s *Speaker) refreshPrefixesLocked(_ context.Context, srv *server.BgpServer) bool {
	t := &s.sessions
	t.mu.Lock()
	var names []string
	for name, st := range t.byName {
		if st.State == StateEstablished {
			names = append(names, name)
		} else if len(st.Prefixes) > 0 {
			st.Prefixes = nil
		}
	}
	t.mu.Unlock()
	got := map[string][]netip.Prefix{}
	for _, name := range names {
		pc, ok := s.applied.peers[name]
		if !ok {
			continue
		}
		ps, err := adjOut(srv, pc)
		if err != nil {
			s.logger.Debug("bgp: list what a peer is sent", "peer", name, "err", err)
			continue
		}
		got[name] = ps
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := false
	for name, ps := range got {
		st := t.byName[name]
		if st == nil || st.State != StateEstablished || slices.Equal(st.Prefixes, ps) {
			continue
		}
		st.Prefixes = ps
		changed = true
	}
	return changed
}
