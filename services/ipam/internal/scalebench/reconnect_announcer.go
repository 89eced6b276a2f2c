package scalebench

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// simAnnouncer plays one announcer over a real gRPC connection: it
// subscribes with the token of the plan it holds, keeps its plan from
// snapshots and changes, sends numbered heartbeats, and reconnects to the
// next replica as announcerd does (jittered backoff, first retry within
// 100 ms, at most 250 ms apart while it holds a plan and last heard from
// an IPAM within the 2 s grace, 2 s otherwise).
type simAnnouncer struct {
	tenant, node string
	// conns are its connections, one per replica; it starts on home.
	conns [][]*grpc.ClientConn
	home  int

	mu        sync.Mutex
	token     string
	l2        map[string]time.Time // address -> when it first came
	routes    map[string]bool      // prefix|peer
	held      bool                 // it has had a plan
	sessions  int                  // sessions that delivered their first plan message
	replica   int                  // the replica of the current session
	firstAt   time.Time            // when the current session's first plan message came
	heard     time.Time            // when the IPAM last sent anything
	snapshots int
	resumes   int
	// ends counts why sessions ended (gRPC code and message), for the log.
	ends    map[string]int
	changed chan struct{}
}

func newSimAnnouncer(tenant, node string, conns [][]*grpc.ClientConn, home int) *simAnnouncer {
	return &simAnnouncer{tenant: tenant, node: node, conns: conns, home: home, l2: map[string]time.Time{}, routes: map[string]bool{}, ends: map[string]int{}, changed: make(chan struct{}, 1)}
}

// simJitter is ipamclient's: a wait drawn evenly from [backoff/4, backoff].
func simJitter(backoff time.Duration) time.Duration {
	lo := backoff / 4
	return lo + rand.N(backoff-lo+1)
}

func (a *simAnnouncer) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for attempt := a.home; ; attempt++ {
		r := attempt % len(a.conns)
		conns := a.conns[r]
		delivered := a.session(ctx, r, conns[rand.N(len(conns))])
		if ctx.Err() != nil {
			return
		}
		if delivered {
			backoff = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(simJitter(backoff)):
		}
		limit := 2 * time.Second // announcerd's MaxBackoff
		a.mu.Lock()
		if a.held && time.Since(a.heard) < 2*time.Second {
			// It holds a plan, within announcerd's grace: retry at least
			// this often.
			limit = 250 * time.Millisecond
		}
		a.mu.Unlock()
		backoff = min(2*backoff, limit)
	}
}

// session runs one subscription until it breaks; it reports whether it
// delivered a plan message.
func (a *simAnnouncer) session(ctx context.Context, r int, conn *grpc.ClientConn) bool {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := ipamv1.NewAnnouncerServiceClient(conn).Subscribe(sctx)
	if err != nil {
		return false
	}
	a.mu.Lock()
	hello := &ipamv1.SubscribeHello{Parent: "tenants/" + a.tenant, Node: a.node,
		Interfaces: []*ipamv1.NetworkInterface{{Name: "eth0", Up: true, Addresses: []string{"2001:db8:ffff::10/64"}}}}
	resuming := a.held && a.token != ""
	if resuming {
		hello.ResumeToken = a.token
	}
	a.mu.Unlock()
	var sendMu sync.Mutex
	send := func(m *ipamv1.SubscribeRequest) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(m)
	}
	if err := send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Hello{Hello: hello}}); err != nil {
		return false
	}
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for seq := uint64(1); ; seq++ {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			if send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Heartbeat{Heartbeat: &ipamv1.Heartbeat{Sequence: seq}}}) != nil {
				return
			}
		}
	}()
	first := true
	for {
		resp, err := stream.Recv()
		if err != nil {
			if ctx.Err() == nil {
				st := status.Convert(err)
				msg := st.Message()
				if len(msg) > 60 {
					msg = msg[:60]
				}
				a.mu.Lock()
				a.ends[st.Code().String()+": "+msg]++
				a.mu.Unlock()
			}
			return !first
		}
		now := time.Now()
		a.mu.Lock()
		a.heard = now
		a.mu.Unlock()
		snap, change := resp.GetSnapshot(), resp.GetChange()
		if snap == nil && (change == nil || (first && !resuming)) {
			continue
		}
		a.mu.Lock()
		if snap != nil {
			a.snapshots++
			old := a.l2
			a.l2, a.routes = map[string]time.Time{}, map[string]bool{}
			for _, l := range snap.GetL2Addresses() {
				at, ok := old[l.GetAddress()]
				if !ok {
					at = now
				}
				a.l2[l.GetAddress()] = at
			}
			for _, rt := range snap.GetRoutes() {
				a.routes[rt.GetPrefix()+"|"+rt.GetPeer()] = true
			}
		} else {
			if first && emptyChange(change) {
				a.resumes++
			}
			for _, l := range change.GetUpsertL2Addresses() {
				if _, ok := a.l2[l.GetAddress()]; !ok {
					a.l2[l.GetAddress()] = now
				}
			}
			for _, addr := range change.GetRemoveL2Addresses() {
				delete(a.l2, addr)
			}
			for _, rt := range change.GetUpsertRoutes() {
				a.routes[rt.GetPrefix()+"|"+rt.GetPeer()] = true
			}
			for _, k := range change.GetRemoveRoutes() {
				delete(a.routes, k.GetPrefix()+"|"+k.GetPeer())
			}
		}
		a.token = resp.GetResumeToken()
		a.held = true
		if first {
			first = false
			a.sessions++
			a.replica = r
			a.firstAt = now
		}
		a.mu.Unlock()
		select {
		case a.changed <- struct{}{}:
		default:
		}
	}
}

func emptyChange(c *ipamv1.PlanChange) bool {
	return len(c.GetUpsertPeers())+len(c.GetRemovePeers())+len(c.GetUpsertRoutes())+len(c.GetRemoveRoutes())+
		len(c.GetUpsertL2Addresses())+len(c.GetRemoveL2Addresses()) == 0
}

// simState is what an announcer holds, copied.
type simState struct {
	sessions, snapshots, resumes, replica int
	firstAt                               time.Time
	l2                                    map[string]time.Time
	routes                                int
}

func (a *simAnnouncer) state() simState {
	a.mu.Lock()
	defer a.mu.Unlock()
	l2 := make(map[string]time.Time, len(a.l2))
	for k, v := range a.l2 {
		l2[k] = v
	}
	return simState{sessions: a.sessions, snapshots: a.snapshots, resumes: a.resumes, replica: a.replica, firstAt: a.firstAt, l2: l2, routes: len(a.routes)}
}

// endReasons sums why the announcers' sessions ended.
func endReasons(anns []*simAnnouncer) map[string]int {
	out := map[string]int{}
	for _, a := range anns {
		a.mu.Lock()
		for k, v := range a.ends {
			out[k] += v
		}
		a.mu.Unlock()
	}
	return out
}
