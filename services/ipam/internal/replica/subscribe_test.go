package replica_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/beaconlb/beacon/pkg/testwait"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

// fakeAnnouncer is a real gRPC client playing an announcer: it subscribes,
// sends heartbeats and keeps the plan it is sent.
type fakeAnnouncer struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan struct{}

	stream ipamv1.AnnouncerService_SubscribeClient
	sendMu sync.Mutex

	mu     sync.Mutex
	l2     map[string]bool
	known  map[string]bool              // the plan's known flag per L2 address
	ever   map[string]bool              // every L2 address it was ever told to answer for
	routes map[string]*ipamv1.PlanRoute // prefix|peer
	peers  map[string]bool
	plans  int // plan messages received
	ch     chan struct{}
}

func subscribe(t *testing.T, addr, tenant, node string, labels map[string]string) *fakeAnnouncer {
	t.Helper()
	return subscribeMAC(t, addr, tenant, node, labels, "")
}

// subscribeMAC is subscribe with a MAC address on the node's eth0.
func subscribeMAC(t *testing.T, addr, tenant, node string, labels map[string]string, mac string) *fakeAnnouncer {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := ipamv1.NewAnnouncerServiceClient(conn).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = stream.Send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Hello{Hello: &ipamv1.SubscribeHello{
		Parent: "tenants/" + tenant, Node: node, Labels: labels,
		Interfaces: []*ipamv1.NetworkInterface{{Name: "eth0", Up: true, Addresses: []string{"192.0.2.10/24"}, HardwareAddress: mac}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeAnnouncer{t: t, cancel: cancel, done: make(chan struct{}), stream: stream, l2: map[string]bool{}, known: map[string]bool{}, ever: map[string]bool{}, routes: map[string]*ipamv1.PlanRoute{}, peers: map[string]bool{}, ch: make(chan struct{}, 1)}
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				f.send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Heartbeat{Heartbeat: &ipamv1.Heartbeat{}}})
			}
		}
	}()
	go func() {
		defer close(f.done)
		defer conn.Close()
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.plans++
			if snap := resp.GetSnapshot(); snap != nil {
				f.l2, f.routes, f.peers = map[string]bool{}, map[string]*ipamv1.PlanRoute{}, map[string]bool{}
				for _, l := range snap.GetL2Addresses() {
					f.l2[l.GetAddress()] = true
					f.known[l.GetAddress()] = l.GetKnown()
					f.ever[l.GetAddress()] = true
				}
				for _, r := range snap.GetRoutes() {
					f.routes[r.GetPrefix()+"|"+r.GetPeer()] = r
				}
				for _, p := range snap.GetPeers() {
					f.peers[p.GetPeer().GetName()] = true
				}
			}
			if c := resp.GetChange(); c != nil {
				for _, l := range c.GetUpsertL2Addresses() {
					f.l2[l.GetAddress()] = true
					f.known[l.GetAddress()] = l.GetKnown()
					f.ever[l.GetAddress()] = true
				}
				for _, a := range c.GetRemoveL2Addresses() {
					delete(f.l2, a)
				}
				for _, r := range c.GetUpsertRoutes() {
					f.routes[r.GetPrefix()+"|"+r.GetPeer()] = r
				}
				for _, k := range c.GetRemoveRoutes() {
					delete(f.routes, k.GetPrefix()+"|"+k.GetPeer())
				}
				for _, p := range c.GetUpsertPeers() {
					f.peers[p.GetPeer().GetName()] = true
				}
				for _, p := range c.GetRemovePeers() {
					delete(f.peers, p)
				}
			}
			f.mu.Unlock()
			select {
			case f.ch <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(f.kill)
	return f
}

func (f *fakeAnnouncer) kill() { f.cancel(); <-f.done }

// send sends one message on the stream (errors show as the stream ending).
func (f *fakeAnnouncer) send(m *ipamv1.SubscribeRequest) {
	f.sendMu.Lock()
	defer f.sendMu.Unlock()
	_ = f.stream.Send(m)
}

// wasKnown reports the known flag the plan last gave addr.
func (f *fakeAnnouncer) wasKnown(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.known[addr]
}

// ended reports whether the stream has ended.
func (f *fakeAnnouncer) ended() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// planned reports whether it has received a plan message.
func (f *fakeAnnouncer) planned() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.plans > 0
}

// everAnswered reports whether it was ever told to answer for addr.
func (f *fakeAnnouncer) everAnswered(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ever[addr]
}

func (f *fakeAnnouncer) l2Addrs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for a := range f.l2 {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// waitFor polls cond until it holds or 10 s pass, and returns how long
// that took.
func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	testwait.Until(t, 10*time.Second, what, cond)
	return time.Since(start)
}

func TestSubscribeL2FailoverAndDrain(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	n2 := startNode(t, env.dial(t), replica.Options{}) // a second replica serving one of the nodes
	mustPool(t, n, "lan", &ipamv1.Pool{Ranges: []string{"192.0.2.100-192.0.2.110"}})
	conn, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ann := ipamv1.NewAnnouncementServiceClient(conn)
	ctx := ctxT(t)
	if _, err := ann.CreateL2Advertisement(ctx, &ipamv1.CreateL2AdvertisementRequest{Parent: "tenants/c1", L2AdvertisementId: "lan", L2Advertisement: &ipamv1.L2Advertisement{Pools: []string{"pools/lan"}}}); err != nil {
		t.Fatal(err)
	}
	a := subscribe(t, n.addr, "c1", "node-a", nil)
	b := subscribe(t, n2.addr, "c1", "node-b", nil)
	al := mustAllocate(t, n, "c1", &ipamv1.Allocation{Owner: "ns/web"})
	vip := al.GetAddresses()[0]
	waitFor(t, "one node to answer for the address", func() bool {
		return len(a.l2Addrs())+len(b.l2Addrs()) == 1
	})
	owner, other := a, b
	if len(b.l2Addrs()) == 1 {
		owner, other = b, a
	}
	if diff := cmp.Diff([]string{vip}, owner.l2Addrs()); diff != "" {
		t.Fatal(diff)
	}
	// A third node joining never moves the address (sticky).
	c := subscribe(t, n.addr, "c1", "node-c", nil)
	waitFor(t, "node-c's first plan", c.planned)
	never(t, time.Second, "the address moved when a node joined", func() bool {
		return c.everAnswered(vip) || len(other.l2Addrs()) != 0 || !cmp.Equal([]string{vip}, owner.l2Addrs())
	})
	c.kill()
	// The owner dies: the other node answers.
	owner.kill()
	took := waitFor(t, "failover", func() bool { return len(other.l2Addrs()) == 1 })
	t.Logf("failover after the owner's stream broke: %v", took)
	// Drain the new owner: the address moves to a third node, and back
	// nowhere else.
	d := subscribe(t, n.addr, "c1", "node-d", nil)
	name := map[*fakeAnnouncer]string{a: "node-a", b: "node-b"}[other]
	if _, err := ipamv1.NewAnnouncerServiceClient(conn).DrainAnnouncer(ctx, &ipamv1.DrainAnnouncerRequest{Name: "tenants/c1/announcers/" + name}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "drain to move the address", func() bool { return len(d.l2Addrs()) == 1 && len(other.l2Addrs()) == 0 })
	list, err := ipamv1.NewAnnouncerServiceClient(conn).ListAnnouncers(ctx, &ipamv1.ListAnnouncersRequest{Parent: "tenants/c1"})
	if err != nil || len(list.GetAnnouncers()) != 2 {
		t.Fatalf("ListAnnouncers = %v, %v", list, err)
	}
	// Release: nobody answers any more.
	if _, err := n.allocs.Release(ctx, &ipamv1.ReleaseRequest{Name: al.GetName()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "release to withdraw", func() bool { return len(d.l2Addrs()) == 0 })
}

func TestSubscribeBGPPlan(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	mustPool(t, n, "bgp", &ipamv1.Pool{Ranges: []string{"203.0.113.0/28"}})
	conn, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ann := ipamv1.NewAnnouncementServiceClient(conn)
	ctx := ctxT(t)
	// r1 is iBGP (LOCAL_PREF is sent), r2 eBGP.
	for _, p := range []struct {
		id, addr, zone string
		asn            uint32
	}{{"r1", "192.0.2.1", "a", 64500}, {"r2", "192.0.2.2", "b", 64501}} {
		if _, err := ann.CreateBGPPeer(ctx, &ipamv1.CreateBGPPeerRequest{Parent: "tenants/c1", BgpPeerId: p.id, BgpPeer: &ipamv1.BGPPeer{
			MyAsn: 64500, PeerAsn: p.asn, PeerAddress: p.addr,
			NodeSelectors: []*ipamv1.LabelSelector{{MatchLabels: map[string]string{"zone": p.zone}}},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ann.CreateBGPAdvertisement(ctx, &ipamv1.CreateBGPAdvertisementRequest{Parent: "tenants/c1", BgpAdvertisementId: "all", BgpAdvertisement: &ipamv1.BGPAdvertisement{
		Communities: []string{"65000:100", "large:1:2:3"}, LocalPref: 150,
	}}); err != nil {
		t.Fatal(err)
	}
	za := subscribe(t, n.addr, "c1", "node-a", map[string]string{"zone": "a"})
	zb := subscribe(t, n.addr, "c1", "node-b", map[string]string{"zone": "b"})
	al := mustAllocate(t, n, "c1", &ipamv1.Allocation{Owner: "ns/web"})
	prefix := al.GetAddresses()[0] + "/32"
	waitFor(t, "routes on both nodes", func() bool {
		za.mu.Lock()
		defer za.mu.Unlock()
		zb.mu.Lock()
		defer zb.mu.Unlock()
		return za.routes[prefix+"|tenants/c1/bgpPeers/r1"] != nil && zb.routes[prefix+"|tenants/c1/bgpPeers/r2"] != nil
	})
	za.mu.Lock()
	r := za.routes[prefix+"|tenants/c1/bgpPeers/r1"]
	_, wrongPeer := za.routes[prefix+"|tenants/c1/bgpPeers/r2"]
	peers := len(za.peers)
	za.mu.Unlock()
	if wrongPeer || peers != 1 {
		t.Fatalf("node-a peers with the wrong routers: peers=%d route to r2=%v", peers, wrongPeer)
	}
	if diff := cmp.Diff([]string{"65000:100"}, r.GetCommunities()); diff != "" {
		t.Errorf("communities: %s", diff)
	}
	if diff := cmp.Diff([]string{"1:2:3"}, r.GetLargeCommunities()); diff != "" {
		t.Errorf("large communities: %s", diff)
	}
	if r.GetLocalPref() != 150 {
		t.Errorf("local pref = %d", r.GetLocalPref())
	}
}

// An announcer that hangs with its connection up (no heartbeats, nothing
// sent, nothing closed) has its session ended by the heartbeat watchdog,
// and its registration with it.
func TestSubscribeSilentAnnouncerEnds(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{Heartbeat: 100 * time.Millisecond})
	conn, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := ctxT(t)
	stream, err := ipamv1.NewAnnouncerServiceClient(conn).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Hello{Hello: &ipamv1.SubscribeHello{Parent: "tenants/c1", Node: "hung"}}}); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				ended <- err
				return
			}
		}
	}()
	select {
	case err := <-ended:
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("session ended with %v, want DeadlineExceeded (no heartbeat)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the silent announcer's session is still open 5s later")
	}
	anns := ipamv1.NewAnnouncerServiceClient(conn)
	waitFor(t, "the hung node to be unregistered", func() bool {
		_, err := anns.GetAnnouncer(ctx, &ipamv1.GetAnnouncerRequest{Name: "tenants/c1/announcers/hung"})
		return status.Code(err) == codes.NotFound
	})
}

// TestSubscribeHeartbeatAcks: every numbered heartbeat is acknowledged
// with its number and a right no longer than twice the heartbeat interval
// (shorter than the three missed heartbeats after which the IPAM ends a
// silent node's session); an unnumbered one grants nothing.
func TestSubscribeHeartbeatAcks(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	const hb = 100 * time.Millisecond
	n := startNode(t, env.client, replica.Options{Heartbeat: hb})
	conn, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := ctxT(t)
	stream, err := ipamv1.NewAnnouncerServiceClient(conn).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(m *ipamv1.SubscribeRequest) {
		t.Helper()
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Hello{Hello: &ipamv1.SubscribeHello{Parent: "tenants/c1", Node: "n1"}}})
	send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Heartbeat{Heartbeat: &ipamv1.Heartbeat{}}})
	var got []uint64
	for seq := uint64(1); seq <= 5; seq++ {
		send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Heartbeat{Heartbeat: &ipamv1.Heartbeat{Sequence: seq}}})
		for {
			resp, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			ack := resp.GetHeartbeatAck()
			if ack == nil {
				continue
			}
			if d := ack.GetValidFor().AsDuration(); d <= 0 || d > 2*hb {
				t.Errorf("heartbeat %d: right of %v, want more than 0 and at most %v", ack.GetSequence(), d, 2*hb)
			}
			got = append(got, ack.GetSequence())
			break
		}
	}
	if diff := cmp.Diff([]uint64{1, 2, 3, 4, 5}, got); diff != "" {
		t.Errorf("acknowledged heartbeats (-want +got):\n%s", diff)
	}
}

// A new L2 address is not known (its owner probes it first); once a node
// has reported answering for it, the node it moves to after the owner dies
// is told it is known (no probe: failover is not delayed). A node's report
// of another host using the address shows on the allocation as a Conflict
// condition, unless the MAC is one of the tenant's own nodes'; a report
// that is not valid ends the session with InvalidArgument.
func TestSubscribeKnownAndConflicts(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	mustPool(t, n, "lan", &ipamv1.Pool{Ranges: []string{"192.0.2.100-192.0.2.110"}})
	conn, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := ctxT(t)
	if _, err := ipamv1.NewAnnouncementServiceClient(conn).CreateL2Advertisement(ctx, &ipamv1.CreateL2AdvertisementRequest{Parent: "tenants/c1", L2AdvertisementId: "lan", L2Advertisement: &ipamv1.L2Advertisement{Pools: []string{"pools/lan"}}}); err != nil {
		t.Fatal(err)
	}
	a := subscribeMAC(t, n.addr, "c1", "node-a", nil, "02:00:00:00:00:0a")
	b := subscribeMAC(t, n.addr, "c1", "node-b", nil, "02:00:00:00:00:0b")
	al := mustAllocate(t, n, "c1", &ipamv1.Allocation{Owner: "ns/web"})
	vip := al.GetAddresses()[0]
	waitFor(t, "one node to answer for the address", func() bool { return len(a.l2Addrs())+len(b.l2Addrs()) == 1 })
	owner, other, otherMAC := a, b, "02:00:00:00:00:0b"
	if len(b.l2Addrs()) == 1 {
		owner, other, otherMAC = b, a, "02:00:00:00:00:0a"
	}
	if owner.wasKnown(vip) {
		t.Errorf("a new address was sent as known")
	}

	// The owner answers, and reports two claims: one by another host, one
	// by the other node (Beacon's own, left out).
	report := func(f *fakeAnnouncer, conflicts ...*ipamv1.AddressConflict) {
		f.send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Status{Status: &ipamv1.AnnouncerStatus{
			Announced: []*ipamv1.AnnouncedAddress{{Address: vip, Protocol: ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2, Interfaces: []string{"eth0"}}},
			Conflicts: conflicts,
		}}})
	}
	report(owner,
		&ipamv1.AddressConflict{Address: vip, Interface: "eth0", HardwareAddress: "02:00:00:00:00:99"},
		&ipamv1.AddressConflict{Address: vip, Interface: "eth0", HardwareAddress: otherMAC},
	)
	allocs := ipamv1.NewAllocationServiceClient(conn)
	type row struct{ Type, Address, MAC string }
	var got []row
	waitFor(t, "the Conflict condition", func() bool {
		r, err := allocs.GetAllocation(ctx, &ipamv1.GetAllocationRequest{Name: al.GetName()})
		if err != nil {
			t.Fatal(err)
		}
		got = nil
		for _, c := range r.GetAllocation().GetConditions() {
			got = append(got, row{c.GetType(), c.GetAddress(), c.GetHardwareAddress()})
		}
		return len(got) > 0
	})
	if diff := cmp.Diff([]row{{"Conflict", vip, "02:00:00:00:00:99"}}, got); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}

	// The owner dies: the other node takes the address, known.
	owner.kill()
	waitFor(t, "failover", func() bool { return len(other.l2Addrs()) == 1 })
	if !other.wasKnown(vip) {
		t.Errorf("the address moved from a node that answered for it was not sent as known")
	}

	// A malformed report ends the session.
	other.send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Status{Status: &ipamv1.AnnouncerStatus{
		Conflicts: []*ipamv1.AddressConflict{{Address: vip, Interface: "eth0", HardwareAddress: "not a MAC"}},
	}}})
	waitFor(t, "the session to end", other.ended)
	if _, err := other.stream.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("stream ended with %v, want InvalidArgument", err)
	}
}
