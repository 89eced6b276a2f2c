package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/announce"
	"github.com/beaconlb/beacon/services/ipam/internal/filter"
	"github.com/beaconlb/beacon/services/ipam/internal/index"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

type allocationService struct {
	ipamv1.UnsafeAllocationServiceServer
	s *Server
}

// render converts an allocation and adds which nodes report announcing it.
func (a *allocationService) render(al *ipam.Allocation, rev int64) *ipamv1.Allocation {
	out := allocationToProto(al, rev)
	if a.s.announced == nil {
		return out
	}
	for _, an := range a.s.announced.AnnouncementsOf(al.Tenant, out.GetAddresses()) {
		p := ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2
		if an.BGP {
			p = ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_BGP
		}
		out.Announcements = append(out.Announcements, &ipamv1.AllocationAnnouncement{
			Announcer: "tenants/" + al.Tenant + "/announcers/" + an.Node, Protocol: p, Interfaces: an.Interfaces, Peers: an.Peers,
			Address: an.Addr,
		})
	}
	for _, c := range a.s.announced.ConflictsOf(al.Tenant, out.GetAddresses()) {
		out.Conditions = append(out.Conditions, conflictCondition(al.Tenant, c))
	}
	return out
}

// conditionConflict is the type of the condition naming another host that
// uses one of an allocation's L2 addresses.
const conditionConflict = "Conflict"

func conflictCondition(tenant string, c announce.Conflict) *ipamv1.AllocationCondition {
	msg := fmt.Sprintf("another host (MAC %s) uses %s on %s's %s: the node does not answer for it there until it is free", c.MAC, c.Addr, c.Node, c.Interface)
	if !c.BeforeAnswering {
		msg = fmt.Sprintf("another host (MAC %s) claimed %s on %s's %s, which answers for it and defends it", c.MAC, c.Addr, c.Node, c.Interface)
	}
	out := &ipamv1.AllocationCondition{
		Type: conditionConflict, Address: c.Addr, Announcer: "tenants/" + tenant + "/announcers/" + c.Node,
		Interface: c.Interface, HardwareAddress: c.MAC, Message: msg,
	}
	if !c.Since.IsZero() {
		out.Since = timestamppb.New(c.Since)
	}
	return out
}

func (a *allocationService) fail(ctx context.Context, method string, err error) error {
	return toStatus(ctx, a.s.logger, method, err)
}

func (a *allocationService) Allocate(ctx context.Context, req *ipamv1.AllocateRequest) (*ipamv1.AllocateResponse, error) {
	const method = "Allocate"
	var fes ipam.FieldErrors
	tenant := parseParent(&fes, "parent", req.GetParent(), false)
	spec := allocationFromProto(&fes, tenant, req.GetAllocation())
	validRequestID(&fes, "request_id", req.GetRequestId())
	if err := fes.Err(); err != nil {
		return nil, a.fail(ctx, method, err)
	}
	res, err := a.s.w.Allocate(ctx, spec, meta(ctx, method, req.GetRequestId(), req))
	if err != nil {
		return nil, a.fail(ctx, method, err)
	}
	return &ipamv1.AllocateResponse{Allocation: allocationToProto(res.Allocation, res.Rev), Created: res.Created}, nil
}

// target returns the tenant and ID an allocation request names, by name
// or by parent and owner.
func target(fes *ipam.FieldErrors, name, parent, owner string) (string, string) {
	switch {
	case name != "" && (parent != "" || owner != ""):
		fes.Add("name", "give either name, or parent and owner, not both")
	case name != "":
		return parseAllocationName(fes, "name", name)
	case parent == "" && owner == "":
		fes.Add("name", "is required (or parent and owner)")
	default:
		t := parseParent(fes, "parent", parent, false)
		printable(fes, "owner", owner, 253, true)
		return t, ipam.AllocationID(owner)
	}
	return "", ""
}

func (a *allocationService) Release(ctx context.Context, req *ipamv1.ReleaseRequest) (*ipamv1.ReleaseResponse, error) {
	const method = "Release"
	var fes ipam.FieldErrors
	tenant, id := target(&fes, req.GetName(), req.GetParent(), req.GetOwner())
	etagRev := parseEtag(&fes, "etag", req.GetEtag())
	var hold *time.Duration
	if req.GetHold() != nil {
		h := durationOK(&fes, "hold", req.GetHold(), 0, maxHold)
		hold = &h
	}
	validRequestID(&fes, "request_id", req.GetRequestId())
	if err := fes.Err(); err != nil {
		return nil, a.fail(ctx, method, err)
	}
	res, err := a.s.w.Release(ctx, tenant, id, etagRev, hold, meta(ctx, method, req.GetRequestId(), req))
	if err != nil {
		return nil, a.fail(ctx, method, err)
	}
	out := &ipamv1.ReleaseResponse{Addresses: addrsToProto(res.Addrs)}
	if !res.HoldExpires.IsZero() {
		out.HoldExpireTime = timestamppb.New(res.HoldExpires)
	}
	return out, nil
}

func (a *allocationService) GetAllocation(ctx context.Context, req *ipamv1.GetAllocationRequest) (*ipamv1.GetAllocationResponse, error) {
	const method = "GetAllocation"
	var fes ipam.FieldErrors
	tenant, id := parseAllocationName(&fes, "name", req.GetName())
	if err := fes.Err(); err != nil {
		return nil, a.fail(ctx, method, err)
	}
	ev, err := a.s.r.Get(ctx, ipam.Ref{Kind: ipam.KindAllocation, ID: tenant + "/" + id})
	if errors.Is(err, ipam.ErrNotFound) {
		return nil, a.fail(ctx, method, ipam.Refuse(ipam.ErrNotFound, "%s not found", req.GetName()))
	}
	if err != nil {
		return nil, a.fail(ctx, method, err)
	}
	return &ipamv1.GetAllocationResponse{Allocation: a.render(ev.Value.(*ipam.Allocation), ev.Rev)}, nil
}

// matchAllocation applies a filter to an allocation; an address term
// matches any of the allocation's addresses.
func matchAllocation(f filter.Filter, a *ipam.Allocation) bool {
	for _, addr := range a.Addrs {
		get := func(field string) (string, bool) {
			switch field {
			case "pool":
				return a.Pool, true
			case "owner":
				return a.Owner, true
			case "namespace":
				return a.Namespace, true
			case "sharing_key":
				return a.SharingKey, true
			case "global_group":
				if a.GlobalGroup == "" {
					return "", true
				}
				return ipam.GroupName(a.GlobalGroup), true
			case "address":
				return addr.String(), true
			}
			return "", false
		}
		if f.Match(get, a.OwnerLabels) {
			return true
		}
	}
	return false
}

// normalizePoolTerms lets filters name pools by ID or by name.
func normalizePoolTerms(f filter.Filter) filter.Filter {
	for i, t := range f.Terms {
		if t.Field == "pool" {
			f.Terms[i].Value = strings.TrimPrefix(t.Value, "pools/")
		}
	}
	return f
}

func (a *allocationService) ListAllocations(ctx context.Context, req *ipamv1.ListAllocationsRequest) (*ipamv1.ListAllocationsResponse, error) {
	const method = "ListAllocations"
	var fes ipam.FieldErrors
	tenant := parseParent(&fes, "parent", req.GetParent(), true)
	size := pageSize(&fes, "page_size", req.GetPageSize())
	f, err := filter.Parse(req.GetFilter(), "pool", "owner", "namespace", "address", "sharing_key", "global_group", "labels")
	if err != nil {
		fes.Add("filter", "%s", err.Error())
	}
	f = normalizePoolTerms(f)
	q := queryHash("ListAllocations", req.GetParent(), req.GetFilter())
	if req.GetHeld() {
		q = queryHash("ListAllocations", req.GetParent(), req.GetFilter(), "held")
	}
	after := a.s.pages.decode(&fes, "page_token", req.GetPageToken(), q)
	if err := fes.Err(); err != nil {
		return nil, a.fail(ctx, method, err)
	}
	if req.GetHeld() {
		return a.listHolds(ctx, tenant, f, after, size, q)
	}
	lq := index.AllocationQuery{After: after, Limit: size, Budget: a.s.listRound}
	if tenant != "-" {
		lq.Tenant = tenant
		// An owner filter names exactly one allocation per tenant.
		if owner, ok := f.Value("owner"); ok {
			lq.ID = tenant + "/" + ipam.AllocationID(owner)
		}
	}
	lq.Pool, _ = f.Value("pool")
	// The orders answer a filter of one pool term alone.
	if onlyPool := len(f.Terms) == 1 && lq.Pool != ""; len(f.Terms) > 0 && !onlyPool {
		lq.Match = func(al *ipam.Allocation) bool { return matchAllocation(f, al) }
	}
	if err := a.s.lister.CaughtUp(ctx); err != nil {
		return nil, a.fail(ctx, method, err)
	}
	if err := a.s.lister.Readable(tenant); err != nil {
		return nil, a.fail(ctx, method, err) // internal: the cause is logged
	}
	resp := &ipamv1.ListAllocationsResponse{}
	for examined := 0; ; examined += a.s.listRound {
		page := a.s.lister.Allocations(lq)
		for _, it := range page.Items {
			resp.Allocations = append(resp.Allocations, a.render(it.Allocation, it.Rev))
		}
		if !page.More {
			return resp, nil
		}
		if len(resp.Allocations) == size || examined+a.s.listRound >= a.s.listMax {
			resp.NextPageToken = a.s.pages.encode(page.Last, q)
			return resp, nil
		}
		lq.After, lq.Limit = page.Last, size-len(resp.Allocations)
	}
}

// A page of ListAllocations reads the replica's index in rounds of at most
// listRound allocations examined (each under the index's lock, so that
// allocations wait for no more than one round), until the page is full or
// listScanMax have been examined: a filter that the index's orders
// (tenant, pool, owner) do not answer, and that matches few allocations,
// then gets a short (even empty) page with a next_page_token, so that a
// page's cost does not grow with what the filter skips.
const (
	listRound   = 10_000
	listScanMax = 100_000
)

// listHolds is ListAllocations with held set: the holds, read from etcd
// at one revision in pages of 500 until a page of matches is full.
func (a *allocationService) listHolds(ctx context.Context, tenant string, f filter.Filter, after string, size int, q uint64) (*ipamv1.ListAllocationsResponse, error) {
	const method = "ListAllocations"
	prefix := tenant + "/"
	if tenant == "-" {
		prefix = ""
	}
	// An owner filter names exactly one hold per tenant.
	if owner, ok := f.Value("owner"); ok && tenant != "-" {
		prefix = tenant + "/" + ipam.AllocationID(owner)
	}
	resp := &ipamv1.ListAllocationsResponse{}
	var rev int64
	for {
		page, err := a.s.r.List(ctx, ipam.KindHold, prefix, after, max(size, 500), rev)
		if err != nil {
			return nil, a.fail(ctx, method, err)
		}
		rev = page.Revision
		for i, ev := range page.Items {
			after = ev.Ref.ID
			h := ev.Value.(*ipam.Hold)
			if !matchAllocation(f, &h.Allocation) {
				continue
			}
			out := allocationToProto(&h.Allocation, ev.Rev)
			out.HoldExpireTime, out.Etag = timestamppb.New(h.ExpireTime), ""
			resp.Allocations = append(resp.Allocations, out)
			if len(resp.Allocations) == size {
				if page.More || i < len(page.Items)-1 {
					resp.NextPageToken = a.s.pages.encode(after, q)
				}
				return resp, nil
			}
		}
		if !page.More {
			return resp, nil
		}
	}
}

func (a *allocationService) RenewAllocation(ctx context.Context, req *ipamv1.RenewAllocationRequest) (*ipamv1.RenewAllocationResponse, error) {
	const method = "RenewAllocation"
	var fes ipam.FieldErrors
	tenant, id := parseAllocationName(&fes, "name", req.GetName())
	ttl := durationOK(&fes, "ttl", req.GetTtl(), minTTL, maxTTL)
	etagRev := parseEtag(&fes, "etag", req.GetEtag())
	if err := fes.Err(); err != nil {
		return nil, a.fail(ctx, method, err)
	}
	res, err := a.s.w.Renew(ctx, tenant, id, etagRev, ttl, meta(ctx, method, "", req))
	if err != nil {
		return nil, a.fail(ctx, method, err)
	}
	return &ipamv1.RenewAllocationResponse{Allocation: allocationToProto(res.Allocation, res.Rev)}, nil
}

// resumeToken renders a revision for WatchAllocations; parseResumeToken
// takes back only what it renders ("r05" and "r+5" are not tokens).
func resumeToken(rev int64) string { return "r" + strconv.FormatInt(rev, 10) }

func parseResumeToken(fes *ipam.FieldErrors, s string) int64 {
	if s == "" {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimPrefix(s, "r"), 10, 64)
	if !strings.HasPrefix(s, "r") || err != nil || v <= 0 || resumeToken(v) != s {
		fes.Add("resume_token", "is not a resume token returned by this API")
		return 0
	}
	return v
}

// snapshotChunk is how many allocations one snapshot message carries.
const snapshotChunk = 200

func (a *allocationService) WatchAllocations(req *ipamv1.WatchAllocationsRequest, stream ipamv1.AllocationService_WatchAllocationsServer) error {
	const method = "WatchAllocations"
	ctx := stream.Context()
	var fes ipam.FieldErrors
	tenant := parseParent(&fes, "parent", req.GetParent(), true)
	rev := parseResumeToken(&fes, req.GetResumeToken())
	if err := fes.Err(); err != nil {
		return a.fail(ctx, method, err)
	}
	prefix := tenant + "/"
	if tenant == "-" {
		prefix = ""
	}
	if rev == 0 {
		var err error
		if rev, err = a.snapshot(ctx, stream, prefix); err != nil {
			return a.fail(ctx, method, err)
		}
	}
	return a.s.streamWatch(ctx, method, ipam.KindAllocation, prefix, rev, func(events []ipam.Event, at int64) error {
		msg := &ipamv1.WatchAllocationsResponse{ResumeToken: resumeToken(at)}
		for _, ev := range events {
			al, ok := ev.Value.(*ipam.Allocation)
			if !ok {
				continue // a delete whose last value etcd no longer has
			}
			t := ipamv1.AllocationEvent_TYPE_PUT
			if ev.Deleted {
				t = ipamv1.AllocationEvent_TYPE_DELETED
			}
			msg.Events = append(msg.Events, &ipamv1.AllocationEvent{Type: t, Allocation: allocationToProto(al, ev.Rev)})
		}
		return stream.Send(msg)
	})
}

// streamWatch follows the objects of kind under idPrefix after revision
// after, handing each batch to send, until the caller leaves (nil), send
// fails (its error), StopStreams is called (errStopping) or the watch
// fails (its status).
func (s *Server) streamWatch(ctx context.Context, method string, kind ipam.Kind, idPrefix string, after int64, send func(events []ipam.Event, rev int64) error) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // StopStreams ends the watch
		select {
		case <-s.stopping:
			cancel()
		case <-wctx.Done():
		}
	}()
	var sendErr error
	err := s.r.WatchKind(wctx, kind, idPrefix, after, func(events []ipam.Event, rev int64) {
		if err := send(events, rev); err != nil {
			sendErr = err
			cancel()
		}
	})
	if sendErr != nil {
		return sendErr
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	select {
	case <-s.stopping:
		return errStopping
	default:
	}
	return toStatus(ctx, s.logger, method, fmt.Errorf("watch: %w", err))
}

// snapshot sends every allocation under prefix at one revision and returns
// that revision.
func (a *allocationService) snapshot(ctx context.Context, stream ipamv1.AllocationService_WatchAllocationsServer, prefix string) (int64, error) {
	var rev int64
	after := ""
	for {
		page, err := a.s.r.List(ctx, ipam.KindAllocation, prefix, after, snapshotChunk, rev)
		if err != nil {
			return 0, err
		}
		rev = page.Revision
		msg := &ipamv1.WatchAllocationsResponse{SnapshotComplete: !page.More}
		if msg.SnapshotComplete {
			// Only the whole snapshot can be resumed after: a token on an
			// earlier message would skip the rest of the snapshot.
			msg.ResumeToken = resumeToken(rev)
		}
		for _, ev := range page.Items {
			after = ev.Ref.ID
			msg.Events = append(msg.Events, &ipamv1.AllocationEvent{Type: ipamv1.AllocationEvent_TYPE_EXISTING, Allocation: allocationToProto(ev.Value.(*ipam.Allocation), ev.Rev)})
		}
		if err := stream.Send(msg); err != nil {
			return 0, err
		}
		if !page.More {
			return rev, nil
		}
	}
}
