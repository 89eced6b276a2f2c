package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/fleet"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/planner"
	"github.com/beaconlb/beacon/services/ipam/internal/subscription"
)

type announcerService struct {
	ipamv1.UnsafeAnnouncerServiceServer
	s *Server
}

// nodeNameRule is the rule validNodeName checks, for error messages.
const nodeNameRule = "must be a node name: a DNS subdomain of at most 253 characters, dot-separated parts of 1-63 lower-case letters, digits and '-' that start and end with a letter or digit"

// validNodeName reports whether s is a node name: a DNS subdomain (RFC
// 1123), as Kubernetes node names are.
func validNodeName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for part := range strings.SplitSeq(s, ".") {
		if part == "" || len(part) > 63 || part[0] == '-' || part[len(part)-1] == '-' {
			return false
		}
		for i := range len(part) {
			c := part[i]
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return false
			}
		}
	}
	return true
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

// Subscribe runs an announcer's session (see package subscription) over
// the stream, and turns how it ended into the stream's status.
func (a *announcerService) Subscribe(stream ipamv1.AnnouncerService_SubscribeServer) error {
	ctx := stream.Context()
	if a.s.hub == nil || a.s.leaser == nil {
		return status.Error(codes.Unimplemented, "this server does not serve announcers")
	}
	cfg := subscription.Config{
		Leaser: a.s.leaser, Feed: hubFeed{a.s.hub}, Heartbeat: a.s.heartbeat,
		Stopping: a.s.stopping, Logger: a.s.logger,
	}
	err := subscription.New(cfg, &announcerStream{s: a.s, stream: stream}).Run(ctx)
	return toStatus(ctx, a.s.logger, "Subscribe", err)
}

// hubFeed feeds sessions their plans from the fleet's hub.
type hubFeed struct{ hub *fleet.Hub }

func (f hubFeed) Subscribe(tenant, node string) (subscription.Plans, func()) {
	sess := f.hub.Attach(tenant, node)
	return sess, func() { f.hub.Detach(sess) }
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
	resp := &ipamv1.SubscribeResponse{HeartbeatInterval: durationpb.New(a.s.heartbeat), ResumeToken: "s"}
	known := func(addr netip.Addr) bool {
		return a.s.fleet != nil && a.s.fleet.Known(u.Tenant, u.Node, addr)
	}
	if u.Snapshot != nil {
		resp.Body = &ipamv1.SubscribeResponse_Snapshot{Snapshot: planToProto(u.Tenant, u.Snapshot, known)}
	} else {
		resp.Body = &ipamv1.SubscribeResponse_Change{Change: deltaToProto(u.Tenant, u.Change, known)}
	}
	return a.stream.Send(resp)
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
	for _, r := range p.Routes {
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

// announcerToProto renders a node's registration, with the labels of its
// cluster record cn (may be nil) merged in.
func (a *announcerService) announcerToProto(n *ipam.Node, cn *ipam.ClusterNode, live, draining bool) *ipamv1.Announcer {
	labels, excluded := n.Effective(cn)
	out := &ipamv1.Announcer{
		Name: "tenants/" + n.Tenant + "/announcers/" + n.Name, Labels: labels, Live: live, Draining: draining,
		Excluded: excluded, Status: &ipamv1.AnnouncerStatus{},
	}
	if !n.ConnectTime.IsZero() {
		out.ConnectTime = timestamppb.New(n.ConnectTime)
	}
	for _, itf := range n.Interfaces {
		ni := &ipamv1.NetworkInterface{Name: itf.Name, HardwareAddress: itf.MAC, Up: itf.Up}
		for _, p := range itf.Addrs {
			ni.Addresses = append(ni.Addresses, p.String())
		}
		out.Interfaces = append(out.Interfaces, ni)
	}
	for _, ad := range n.Announced {
		proto := ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2
		if ad.BGP {
			proto = ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_BGP
		}
		out.Status.Announced = append(out.Status.Announced, &ipamv1.AnnouncedAddress{Address: ad.Addr, Protocol: proto, Interfaces: ad.Interfaces, Peers: ad.Peers})
	}
	for _, c := range n.Conflicts {
		ac := &ipamv1.AddressConflict{Address: c.Addr, Interface: c.Interface, HardwareAddress: c.MAC, BeforeAnswering: c.BeforeAnswering}
		if !c.Since.IsZero() {
			ac.FirstSeenTime = timestamppb.New(c.Since)
		}
		out.Status.Conflicts = append(out.Status.Conflicts, ac)
	}
	for _, s := range n.Sessions {
		st := ipamv1.BGPSessionStatus_State(ipamv1.BGPSessionStatus_State_value["STATE_"+s.State])
		bs := &ipamv1.BGPSessionStatus{Peer: s.Peer, State: st, BfdUp: s.BFDUp, AdvertisedPrefixes: uint32(s.Advertised)}
		if !s.Since.IsZero() {
			bs.Since = timestamppb.New(s.Since)
		}
		out.Status.Sessions = append(out.Status.Sessions, bs)
	}
	return out
}

// parseAnnouncerName returns the tenant and node of
// "tenants/{tenant}/announcers/{node}".
func parseAnnouncerName(fes *ipam.FieldErrors, name string) (string, string) {
	rest, ok := strings.CutPrefix(name, "tenants/")
	t, n, ok2 := strings.Cut(rest, "/announcers/")
	if !ok || !ok2 || !validTenant(t) || !validNodeName(n) {
		fes.Add("name", "must be tenants/{tenant}/announcers/{node}")
		return "", ""
	}
	return t, n
}

// announcer reads a node's registration and drain mark from etcd.
func (a *announcerService) announcer(ctx context.Context, tenant, node string) (*ipamv1.Announcer, error) {
	n := &ipam.Node{Tenant: tenant, Name: node}
	live := false
	ev, err := a.s.r.Get(ctx, ipam.Ref{Kind: ipam.KindNode, ID: tenant + "/" + node})
	switch {
	case err == nil:
		n, live = ev.Value.(*ipam.Node), true
	case !errors.Is(err, ipam.ErrNotFound):
		return nil, err
	}
	_, err = a.s.r.Get(ctx, ipam.Ref{Kind: ipam.KindDrain, ID: tenant + "/" + node})
	draining := err == nil
	if err != nil && !errors.Is(err, ipam.ErrNotFound) {
		return nil, err
	}
	if !live && !draining {
		return nil, ipam.Refuse(ipam.ErrNotFound, "announcer tenants/%s/announcers/%s is not subscribed", tenant, node)
	}
	var cn *ipam.ClusterNode
	ev, err = a.s.r.Get(ctx, ipam.Ref{Kind: ipam.KindClusterNode, ID: tenant + "/" + node})
	switch {
	case err == nil:
		cn = ev.Value.(*ipam.ClusterNode)
	case !errors.Is(err, ipam.ErrNotFound):
		return nil, err
	}
	return a.announcerToProto(n, cn, live, draining), nil
}

func (a *announcerService) GetAnnouncer(ctx context.Context, req *ipamv1.GetAnnouncerRequest) (*ipamv1.GetAnnouncerResponse, error) {
	var fes ipam.FieldErrors
	tenant, node := parseAnnouncerName(&fes, req.GetName())
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, a.s.logger, "GetAnnouncer", err)
	}
	out, err := a.announcer(ctx, tenant, node)
	if err != nil {
		return nil, toStatus(ctx, a.s.logger, "GetAnnouncer", err)
	}
	return &ipamv1.GetAnnouncerResponse{Announcer: out}, nil
}

func (a *announcerService) ListAnnouncers(ctx context.Context, req *ipamv1.ListAnnouncersRequest) (*ipamv1.ListAnnouncersResponse, error) {
	const method = "ListAnnouncers"
	var fes ipam.FieldErrors
	tenant := parseParent(&fes, "parent", req.GetParent(), true)
	size := pageSize(&fes, "page_size", req.GetPageSize())
	q := queryHash("announcers", req.GetParent())
	after := a.s.pages.decode(&fes, "page_token", req.GetPageToken(), q)
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, a.s.logger, method, err)
	}
	prefix := tenant + "/"
	if tenant == "-" {
		prefix = ""
	}
	page, err := a.s.r.List(ctx, ipam.KindNode, prefix, after, size, 0)
	if err != nil {
		return nil, toStatus(ctx, a.s.logger, method, err)
	}
	// The drains and cluster labels of the page's nodes: those from the
	// page's start to its last node, or to the end on the last page (which
	// also lists drained nodes that are not subscribed).
	last := ""
	if page.More && len(page.Items) > 0 {
		last = page.Items[len(page.Items)-1].Ref.ID
	}
	drains, err := a.listUpTo(ctx, ipam.KindDrain, prefix, after, last, page.Revision)
	if err != nil {
		return nil, toStatus(ctx, a.s.logger, method, err)
	}
	drained := map[string]bool{}
	for _, ev := range drains {
		drained[ev.Ref.ID] = true
	}
	cnodes, err := a.listUpTo(ctx, ipam.KindClusterNode, prefix, after, last, page.Revision)
	if err != nil {
		return nil, toStatus(ctx, a.s.logger, method, err)
	}
	cluster := map[string]*ipam.ClusterNode{}
	for _, ev := range cnodes {
		cluster[ev.Ref.ID] = ev.Value.(*ipam.ClusterNode)
	}
	resp := &ipamv1.ListAnnouncersResponse{}
	live := map[string]bool{}
	for _, ev := range page.Items {
		live[ev.Ref.ID] = true
		resp.Announcers = append(resp.Announcers, a.announcerToProto(ev.Value.(*ipam.Node), cluster[ev.Ref.ID], true, drained[ev.Ref.ID]))
	}
	if page.More && len(page.Items) > 0 {
		resp.NextPageToken = a.s.pages.encode(page.Items[len(page.Items)-1].Ref.ID, q)
	}
	// Drained nodes that are not subscribed are listed too, so a forgotten
	// drain can be found (on the last page, after the live ones).
	if resp.NextPageToken == "" {
		for _, ev := range drains {
			if d, ok := ev.Value.(*ipam.Drain); ok && !live[ev.Ref.ID] {
				resp.Announcers = append(resp.Announcers, a.announcerToProto(&ipam.Node{Tenant: d.Tenant, Name: d.Node}, cluster[ev.Ref.ID], false, true))
			}
		}
	}
	return resp, nil
}

// listUpTo reads the objects of a kind whose IDs start with prefix, after
// startAfter and up to last ("": to the end), at revision rev.
func (a *announcerService) listUpTo(ctx context.Context, kind ipam.Kind, prefix, startAfter, last string, rev int64) ([]ipam.Event, error) {
	var out []ipam.Event
	for {
		page, err := a.s.r.List(ctx, kind, prefix, startAfter, 500, rev)
		if err != nil {
			return nil, err
		}
		for _, ev := range page.Items {
			if last != "" && ev.Ref.ID > last {
				return out, nil
			}
			out = append(out, ev)
		}
		if !page.More || len(page.Items) == 0 {
			return out, nil
		}
		startAfter = page.Items[len(page.Items)-1].Ref.ID
	}
}

func (a *announcerService) DrainAnnouncer(ctx context.Context, req *ipamv1.DrainAnnouncerRequest) (*ipamv1.DrainAnnouncerResponse, error) {
	var fes ipam.FieldErrors
	tenant, node := parseAnnouncerName(&fes, req.GetName())
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, a.s.logger, "DrainAnnouncer", err)
	}
	ref := ipam.Ref{Kind: ipam.KindDrain, ID: tenant + "/" + node}
	_, err := a.s.w.CreateConfig(ctx, ref, &ipam.Drain{Tenant: tenant, Node: node}, func(string, time.Time) {}, false, meta(ctx, "DrainAnnouncer", "", req))
	if err != nil && !errors.Is(err, ipam.ErrAlreadyExists) {
		return nil, toStatus(ctx, a.s.logger, "DrainAnnouncer", err)
	}
	out, err := a.announcer(ctx, tenant, node)
	if err != nil {
		return nil, toStatus(ctx, a.s.logger, "DrainAnnouncer", err)
	}
	return &ipamv1.DrainAnnouncerResponse{Announcer: out}, nil
}

func (a *announcerService) UndrainAnnouncer(ctx context.Context, req *ipamv1.UndrainAnnouncerRequest) (*ipamv1.UndrainAnnouncerResponse, error) {
	var fes ipam.FieldErrors
	tenant, node := parseAnnouncerName(&fes, req.GetName())
	if err := fes.Err(); err != nil {
		return nil, toStatus(ctx, a.s.logger, "UndrainAnnouncer", err)
	}
	ref := ipam.Ref{Kind: ipam.KindDrain, ID: tenant + "/" + node}
	if err := a.s.w.DeleteConfig(ctx, ref, 0, 0, nil, meta(ctx, "UndrainAnnouncer", "", req)); err != nil && !errors.Is(err, ipam.ErrNotFound) {
		return nil, toStatus(ctx, a.s.logger, "UndrainAnnouncer", err)
	}
	out, err := a.announcer(ctx, tenant, node)
	if errors.Is(err, ipam.ErrNotFound) {
		// Not subscribed and no longer drained: only its record is left.
		var cn *ipam.ClusterNode
		if ev, err := a.s.r.Get(ctx, ipam.Ref{Kind: ipam.KindClusterNode, ID: tenant + "/" + node}); err == nil {
			cn = ev.Value.(*ipam.ClusterNode)
		}
		return &ipamv1.UndrainAnnouncerResponse{Announcer: a.announcerToProto(&ipam.Node{Tenant: tenant, Name: node}, cn, false, false)}, nil
	}
	if err != nil {
		return nil, toStatus(ctx, a.s.logger, "UndrainAnnouncer", err)
	}
	return &ipamv1.UndrainAnnouncerResponse{Announcer: out}, nil
}
