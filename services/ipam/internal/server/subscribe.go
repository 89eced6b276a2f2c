package server

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/announce"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/planner"
	"github.com/beaconlb/beacon/services/ipam/internal/subscription"
)

// Subscribe runs an announcer's session (see package subscription) over
// the stream, and turns how it ended into the stream's status.
func (a *announcerService) Subscribe(stream ipamv1.AnnouncerService_SubscribeServer) error {
	ctx := stream.Context()
	if a.s.hub == nil || a.s.leases == nil {
		return status.Error(codes.Unimplemented, "this server does not serve announcers")
	}
	cfg := subscription.Config{
		Leases: a.s.leases, Feed: hubFeed{a.s.hub}, Heartbeat: a.s.heartbeat,
		Stopping: a.s.stopping, Logger: a.s.logger,
	}
	err := subscription.New(cfg, &announcerStream{s: a.s, stream: stream}).Run(ctx)
	return toStatus(ctx, a.s.logger, "Subscribe", err)
}

// hubFeed feeds sessions their plans from the announce package's hub.
type hubFeed struct{ hub *announce.Hub }

func (f hubFeed) Subscribe(tenant, node string, holds func(*ipam.NodePlan) bool) (subscription.Plans, func()) {
	sess := f.hub.AttachHolding(tenant, node, holds)
	return sess, func() { f.hub.Detach(sess) }
}

// refusedByGuard reports whether a Recv error is the access guard's
// refusal of the message (access.Guard checks every message a stream
// receives) rather than the stream's end: those are the codes the guard
// refuses messages with, and none that the transport ends a stream with.
func refusedByGuard(err error) bool {
	switch status.Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument:
		return true
	}
	return false
}

// announcerStream converts the messages of a Subscribe stream to and from
// a session's, validating what the announcer sends.
type announcerStream struct {
	s       *Server
	stream  ipamv1.AnnouncerService_SubscribeServer
	started bool // the first message was received
}

func (a *announcerStream) Recv() (subscription.Message, error) {
	msg, err := a.stream.Recv()
	if err != nil {
		if refusedByGuard(err) {
			return subscription.Message{}, fmt.Errorf("%w: %w", subscription.ErrRefused, err)
		}
		return subscription.Message{}, err
	}
	var fes ipam.FieldErrors
	var out subscription.Message
	first := !a.started
	a.started = true
	if first {
		// Only the first message may be a hello, and it must be (the
		// session checks that); a later one is ignored.
		if hello := msg.GetHello(); hello != nil {
			out.Hello = helloFromProto(&fes, hello)
			// Never refused: a token this replica cannot use gets the
			// node a snapshot (see subscription.Token).
			out.ResumeToken = hello.GetResumeToken()
		}
		return out, fes.Err()
	}
	switch b := msg.GetBody().(type) {
	case *ipamv1.SubscribeRequest_Heartbeat:
		out.Heartbeat = &subscription.Heartbeat{Sequence: b.Heartbeat.GetSequence()}
	case *ipamv1.SubscribeRequest_Status:
		announced, sessions := statusFromProto(b.Status)
		conflicts := conflictsFromProto(&fes, "status.conflicts", b.Status.GetConflicts())
		out.Status = &subscription.Status{Announced: announced, Sessions: sessions, Conflicts: conflicts}
	case *ipamv1.SubscribeRequest_Interfaces:
		out.Interfaces = &subscription.Interfaces{List: interfacesFromProto(&fes, "interfaces.interfaces", b.Interfaces.GetInterfaces())}
	}
	return out, fes.Err()
}

// helloFromProto validates a hello: the node's registration.
func helloFromProto(fes *ipam.FieldErrors, hello *ipamv1.SubscribeHello) *ipam.Node {
	tenant := parseParent(fes, "hello.parent", hello.GetParent(), false)
	if !validNodeName(hello.GetNode()) {
		fes.Add("hello.node", "must be 1-253 lower-case letters, digits, '-' and '.'")
	}
	labelsOK(fes, "hello.labels", hello.GetLabels())
	return &ipam.Node{
		Tenant: tenant, Name: hello.GetNode(), Labels: hello.GetLabels(),
		Interfaces: interfacesFromProto(fes, "hello.interfaces", hello.GetInterfaces()),
	}
}

func (a *announcerStream) SendUpdate(u subscription.Update) error {
	resp := &ipamv1.SubscribeResponse{HeartbeatInterval: durationpb.New(a.s.heartbeat), ResumeToken: u.Token}
	known := func(addr netip.Addr) bool {
		return a.s.announced != nil && a.s.announced.Known(u.Tenant, u.Node, addr)
	}
	if u.Snapshot == nil {
		resp.Body = &ipamv1.SubscribeResponse_Change{Change: deltaToProto(u.Tenant, u.Change, known)}
		return a.stream.Send(resp)
	}
	// A snapshot is a node's whole plan (60,000 routes is 6 MB), and many
	// nodes take theirs at once when they connect. Encoded all at once,
	// they leave every other goroutine of the replica, its lease's
	// keep-alive among them, waiting its turn behind hundreds of
	// encoders: on 2 cores, 300 snapshots lost the replica its 2 s lease
	// (docs/performance.md, "One very large tenant"). So snapshots are
	// built and encoded about one per core at a time, and sent (which may
	// wait on a slow node) outside that bound.
	ctx := a.stream.Context()
	select {
	case a.s.encoding <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	resp.Body = &ipamv1.SubscribeResponse_Snapshot{Snapshot: planToProto(u.Tenant, u.Snapshot, known)}
	var msg grpc.PreparedMsg
	err := msg.Encode(a.stream, resp)
	<-a.s.encoding
	if err != nil {
		return err
	}
	return a.stream.SendMsg(&msg)
}

func (a *announcerStream) SendHeartbeat(ack *subscription.Ack) error {
	resp := &ipamv1.SubscribeResponse{HeartbeatInterval: durationpb.New(a.s.heartbeat)}
	if ack != nil {
		resp.HeartbeatAck = &ipamv1.HeartbeatAck{Sequence: ack.Sequence, ValidFor: durationpb.New(ack.ValidFor)}
	}
	return a.stream.Send(resp)
}

func statusFromProto(st *ipamv1.AnnouncerStatus) ([]ipam.AnnouncedAddr, []ipam.SessionStatus) {
	var ann []ipam.AnnouncedAddr
	for _, a := range st.GetAnnounced() {
		ann = append(ann, ipam.AnnouncedAddr{
			Addr: a.GetAddress(), BGP: a.GetProtocol() == ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_BGP,
			Interfaces: a.GetInterfaces(), Peers: a.GetPeers(),
		})
	}
	var sess []ipam.SessionStatus
	for _, s := range st.GetSessions() {
		ss := ipam.SessionStatus{Peer: s.GetPeer(), State: strings.TrimPrefix(s.GetState().String(), "STATE_"), BFDUp: s.GetBfdUp(), Advertised: int(s.GetAdvertisedPrefixes())}
		if s.GetSince() != nil {
			ss.Since = s.GetSince().AsTime()
		}
		sess = append(sess, ss)
	}
	return ann, sess
}

// conflictsFromProto validates the conflicts a node reports.
func conflictsFromProto(fes *ipam.FieldErrors, field string, in []*ipamv1.AddressConflict) []ipam.AddrConflict {
	if len(in) > 1024 {
		fes.Add(field, "at most 1024 conflicts")
		return nil
	}
	var out []ipam.AddrConflict
	for i, c := range in {
		f := fmt.Sprintf("%s[%d]", field, i)
		addr, err := netip.ParseAddr(c.GetAddress())
		if err != nil || addr.Zone() != "" {
			fes.Add(f+".address", "must be an IP address")
			continue
		}
		mac, err := net.ParseMAC(c.GetHardwareAddress())
		if err != nil || len(mac) != 6 {
			fes.Add(f+".hardware_address", "must be a 6-byte MAC address such as 02:00:00:00:00:01")
			continue
		}
		interfacesOK(fes, f+".interface", []string{c.GetInterface()})
		ac := ipam.AddrConflict{Addr: addr.String(), Interface: c.GetInterface(), MAC: mac.String(), BeforeAnswering: c.GetBeforeAnswering()}
		if c.GetFirstSeenTime() != nil {
			ac.Since = c.GetFirstSeenTime().AsTime()
		}
		out = append(out, ac)
	}
	return out
}

func peerName(tenant, id string) string { return configName(tenant, "bgpPeers", id) }

func planPeerToProto(tenant string, p ipam.PlanPeer) *ipamv1.PlanPeer {
	out := &ipamv1.PlanPeer{Peer: peerToProto(p.Peer, 0, true)}
	out.Peer.Name = peerName(tenant, p.Peer.ID)
	if p.BFD != nil {
		out.Bfd = bfdToProto(p.BFD, 0)
	}
	return out
}

func communityStrings(cs []uint32) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = fmt.Sprintf("%d:%d", c>>16, c&0xffff)
	}
	return out
}

func largeStrings(cs [][3]uint32) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = fmt.Sprintf("%d:%d:%d", c[0], c[1], c[2])
	}
	return out
}

func routeToProto(tenant string, r ipam.PlanRoute) *ipamv1.PlanRoute {
	return &ipamv1.PlanRoute{
		Prefix: r.Prefix.String(), Peer: peerName(tenant, r.Peer),
		Communities: communityStrings(r.Communities), LargeCommunities: largeStrings(r.LargeCommunities), LocalPref: r.LocalPref,
		Med: r.MED, AsPathPrepend: r.ASPathPrepend,
	}
}

// l2ToPlanProto renders one L2 address of a plan; known says whether
// Beacon was already answering for it (the node need not probe it).
func l2ToPlanProto(l ipam.PlanL2, known func(netip.Addr) bool) *ipamv1.PlanL2Address {
	return &ipamv1.PlanL2Address{Address: l.Addr.String(), Interfaces: l.Interfaces, Known: known(l.Addr)}
}

func planToProto(tenant string, p *ipam.NodePlan, known func(netip.Addr) bool) *ipamv1.Plan {
	out := &ipamv1.Plan{}
	for _, pp := range p.Peers {
		out.Peers = append(out.Peers, planPeerToProto(tenant, pp))
	}
	for r := range p.Routes.All() {
		out.Routes = append(out.Routes, routeToProto(tenant, r))
	}
	for _, l := range p.L2 {
		out.L2Addresses = append(out.L2Addresses, l2ToPlanProto(l, known))
	}
	return out
}

func deltaToProto(tenant string, d *planner.Delta, known func(netip.Addr) bool) *ipamv1.PlanChange {
	out := &ipamv1.PlanChange{}
	for _, pp := range d.UpsertPeers {
		out.UpsertPeers = append(out.UpsertPeers, planPeerToProto(tenant, pp))
	}
	for _, id := range d.RemovePeers {
		out.RemovePeers = append(out.RemovePeers, peerName(tenant, id))
	}
	for _, r := range d.UpsertRoutes {
		out.UpsertRoutes = append(out.UpsertRoutes, routeToProto(tenant, r))
	}
	for _, k := range d.RemoveRoutes {
		out.RemoveRoutes = append(out.RemoveRoutes, &ipamv1.RouteKey{Prefix: k.Prefix.String(), Peer: peerName(tenant, k.Peer)})
	}
	for _, l := range d.UpsertL2 {
		out.UpsertL2Addresses = append(out.UpsertL2Addresses, l2ToPlanProto(l, known))
	}
	for _, a := range d.RemoveL2 {
		out.RemoveL2Addresses = append(out.RemoveL2Addresses, a.String())
	}
	return out
}

func interfacesFromProto(fes *ipam.FieldErrors, field string, in []*ipamv1.NetworkInterface) []ipam.Interface {
	if len(in) > 1024 {
		fes.Add(field, "at most 1024 interfaces")
		return nil
	}
	out := make([]ipam.Interface, 0, len(in))
	for i, ni := range in {
		f := fmt.Sprintf("%s[%d]", field, i)
		interfacesOK(fes, f+".name", []string{ni.GetName()})
		itf := ipam.Interface{Name: ni.GetName(), MAC: ni.GetHardwareAddress(), Up: ni.GetUp()}
		for j, a := range ni.GetAddresses() {
			p, err := netip.ParsePrefix(a)
			if err != nil {
				fes.Add(fmt.Sprintf("%s.addresses[%d]", f, j), "is not an address in CIDR form")
				continue
			}
			itf.Addrs = append(itf.Addrs, p)
		}
		out = append(out, itf)
	}
	return out
}
