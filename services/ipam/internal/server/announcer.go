package server

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
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
