package cli

import (
	"context"
	"maps"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// The fake's announcement resources are kept by name and handled
// generically, through reflection on their name and etag fields; its own
// helpers keep it independent of the code under test.

func fakeField(m proto.Message, name string) protoreflect.FieldDescriptor {
	return m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name))
}

func fakeString(m proto.Message, name string) string {
	return m.ProtoReflect().Get(fakeField(m, name)).String()
}

func fakeSetString(m proto.Message, name, value string) {
	m.ProtoReflect().Set(fakeField(m, name), protoreflect.ValueOfString(value))
}

func configCreate[M proto.Message](f *fakeIPAM, parent, collection, id string, in M, validateOnly bool) (M, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var zero M
	if parent == "" || strings.HasSuffix(parent, "/-") || id == "" || strings.Contains(id, "/") {
		return zero, status.Errorf(codes.InvalidArgument, "bad parent %q or ID %q", parent, id)
	}
	name := parent + "/" + collection + "/" + id
	if _, ok := f.configs[name]; ok {
		return zero, status.Errorf(codes.AlreadyExists, "%s already exists", name)
	}
	m := proto.Clone(in).(M)
	if !m.ProtoReflect().IsValid() {
		m = m.ProtoReflect().New().Interface().(M)
	}
	fakeSetString(m, "name", name)
	fakeSetString(m, "etag", "e1")
	if !validateOnly {
		f.configs[name] = m
	}
	return m, nil
}

func configGet[M proto.Message](f *fakeIPAM, name string) (M, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.configs[name].(M)
	if !ok {
		var zero M
		return zero, status.Errorf(codes.NotFound, "%s not found", name)
	}
	return m, nil
}

func configList[M proto.Message](f *fakeIPAM, parent, collection, token string, size int32) ([]M, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []M
	for _, name := range slices.Sorted(maps.Keys(f.configs)) {
		if parent == "tenants/-" && strings.Contains(name, "/"+collection+"/") || strings.HasPrefix(name, parent+"/"+collection+"/") {
			if m, ok := f.configs[name].(M); ok {
				all = append(all, m)
			}
		}
	}
	return page(all, token, int(size), f.pageSize)
}

func configUpdate[M proto.Message](f *fakeIPAM, in M, paths []string, validateOnly bool) (M, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var zero M
	name := fakeString(in, "name")
	cur, ok := f.configs[name].(M)
	if !ok {
		return zero, status.Errorf(codes.NotFound, "%s not found", name)
	}
	if e := fakeString(in, "etag"); e != "" && e != fakeString(cur, "etag") {
		return zero, status.Errorf(codes.Aborted, "%s changed: etag %s, not %s", name, fakeString(cur, "etag"), e)
	}
	if len(paths) == 0 {
		return zero, status.Error(codes.InvalidArgument, "empty update_mask")
	}
	m := proto.Clone(cur).(M)
	for _, p := range paths {
		fd := fakeField(m, p)
		if fd == nil || p == "name" || p == "etag" || p == "uid" || p == "conditions" {
			return zero, status.Errorf(codes.InvalidArgument, "unknown update_mask path %q", p)
		}
		if in.ProtoReflect().Has(fd) {
			m.ProtoReflect().Set(fd, in.ProtoReflect().Get(fd))
		} else {
			m.ProtoReflect().Clear(fd)
		}
	}
	fakeSetString(m, "etag", fakeString(cur, "etag")+"+")
	if !validateOnly {
		f.configs[name] = m
	}
	return m, nil
}

func configDelete(f *fakeIPAM, name, etag string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.configs[name]
	if !ok {
		return status.Errorf(codes.NotFound, "%s not found", name)
	}
	if etag != "" && etag != fakeString(cur, "etag") {
		return status.Errorf(codes.Aborted, "%s changed: etag %s, not %s", name, fakeString(cur, "etag"), etag)
	}
	delete(f.configs, name)
	return nil
}

func (f *fakeIPAM) CreateL2Advertisement(_ context.Context, req *ipamv1.CreateL2AdvertisementRequest) (*ipamv1.CreateL2AdvertisementResponse, error) {
	m, err := configCreate(f, req.GetParent(), "l2Advertisements", req.GetL2AdvertisementId(), req.GetL2Advertisement(), req.GetValidateOnly())
	return &ipamv1.CreateL2AdvertisementResponse{L2Advertisement: m}, err
}

func (f *fakeIPAM) GetL2Advertisement(_ context.Context, req *ipamv1.GetL2AdvertisementRequest) (*ipamv1.GetL2AdvertisementResponse, error) {
	m, err := configGet[*ipamv1.L2Advertisement](f, req.GetName())
	return &ipamv1.GetL2AdvertisementResponse{L2Advertisement: m}, err
}

func (f *fakeIPAM) ListL2Advertisements(_ context.Context, req *ipamv1.ListL2AdvertisementsRequest) (*ipamv1.ListL2AdvertisementsResponse, error) {
	ms, next, err := configList[*ipamv1.L2Advertisement](f, req.GetParent(), "l2Advertisements", req.GetPageToken(), req.GetPageSize())
	return &ipamv1.ListL2AdvertisementsResponse{L2Advertisements: ms, NextPageToken: next}, err
}

func (f *fakeIPAM) UpdateL2Advertisement(_ context.Context, req *ipamv1.UpdateL2AdvertisementRequest) (*ipamv1.UpdateL2AdvertisementResponse, error) {
	m, err := configUpdate(f, req.GetL2Advertisement(), req.GetUpdateMask().GetPaths(), req.GetValidateOnly())
	return &ipamv1.UpdateL2AdvertisementResponse{L2Advertisement: m}, err
}

func (f *fakeIPAM) DeleteL2Advertisement(_ context.Context, req *ipamv1.DeleteL2AdvertisementRequest) (*ipamv1.DeleteL2AdvertisementResponse, error) {
	return &ipamv1.DeleteL2AdvertisementResponse{}, configDelete(f, req.GetName(), req.GetEtag())
}

func (f *fakeIPAM) CreateBGPAdvertisement(_ context.Context, req *ipamv1.CreateBGPAdvertisementRequest) (*ipamv1.CreateBGPAdvertisementResponse, error) {
	m, err := configCreate(f, req.GetParent(), "bgpAdvertisements", req.GetBgpAdvertisementId(), req.GetBgpAdvertisement(), req.GetValidateOnly())
	return &ipamv1.CreateBGPAdvertisementResponse{BgpAdvertisement: m}, err
}

func (f *fakeIPAM) GetBGPAdvertisement(_ context.Context, req *ipamv1.GetBGPAdvertisementRequest) (*ipamv1.GetBGPAdvertisementResponse, error) {
	m, err := configGet[*ipamv1.BGPAdvertisement](f, req.GetName())
	return &ipamv1.GetBGPAdvertisementResponse{BgpAdvertisement: m}, err
}

func (f *fakeIPAM) ListBGPAdvertisements(_ context.Context, req *ipamv1.ListBGPAdvertisementsRequest) (*ipamv1.ListBGPAdvertisementsResponse, error) {
	ms, next, err := configList[*ipamv1.BGPAdvertisement](f, req.GetParent(), "bgpAdvertisements", req.GetPageToken(), req.GetPageSize())
	return &ipamv1.ListBGPAdvertisementsResponse{BgpAdvertisements: ms, NextPageToken: next}, err
}

func (f *fakeIPAM) UpdateBGPAdvertisement(_ context.Context, req *ipamv1.UpdateBGPAdvertisementRequest) (*ipamv1.UpdateBGPAdvertisementResponse, error) {
	m, err := configUpdate(f, req.GetBgpAdvertisement(), req.GetUpdateMask().GetPaths(), req.GetValidateOnly())
	return &ipamv1.UpdateBGPAdvertisementResponse{BgpAdvertisement: m}, err
}

func (f *fakeIPAM) DeleteBGPAdvertisement(_ context.Context, req *ipamv1.DeleteBGPAdvertisementRequest) (*ipamv1.DeleteBGPAdvertisementResponse, error) {
	return &ipamv1.DeleteBGPAdvertisementResponse{}, configDelete(f, req.GetName(), req.GetEtag())
}

// peerOut is a stored peer as reads return it: without its password, as
// the API documents.
func peerOut(p *ipamv1.BGPPeer) *ipamv1.BGPPeer {
	if p == nil {
		return nil
	}
	p = proto.Clone(p).(*ipamv1.BGPPeer)
	p.HasPassword = p.GetPassword() != ""
	p.Password = ""
	return p
}

func (f *fakeIPAM) CreateBGPPeer(_ context.Context, req *ipamv1.CreateBGPPeerRequest) (*ipamv1.CreateBGPPeerResponse, error) {
	m, err := configCreate(f, req.GetParent(), "bgpPeers", req.GetBgpPeerId(), req.GetBgpPeer(), req.GetValidateOnly())
	return &ipamv1.CreateBGPPeerResponse{BgpPeer: peerOut(m)}, err
}

func (f *fakeIPAM) GetBGPPeer(_ context.Context, req *ipamv1.GetBGPPeerRequest) (*ipamv1.GetBGPPeerResponse, error) {
	m, err := configGet[*ipamv1.BGPPeer](f, req.GetName())
	return &ipamv1.GetBGPPeerResponse{BgpPeer: peerOut(m)}, err
}

func (f *fakeIPAM) ListBGPPeers(_ context.Context, req *ipamv1.ListBGPPeersRequest) (*ipamv1.ListBGPPeersResponse, error) {
	ms, next, err := configList[*ipamv1.BGPPeer](f, req.GetParent(), "bgpPeers", req.GetPageToken(), req.GetPageSize())
	out := make([]*ipamv1.BGPPeer, len(ms))
	for i, m := range ms {
		out[i] = peerOut(m)
	}
	return &ipamv1.ListBGPPeersResponse{BgpPeers: out, NextPageToken: next}, err
}

func (f *fakeIPAM) UpdateBGPPeer(_ context.Context, req *ipamv1.UpdateBGPPeerRequest) (*ipamv1.UpdateBGPPeerResponse, error) {
	m, err := configUpdate(f, req.GetBgpPeer(), req.GetUpdateMask().GetPaths(), req.GetValidateOnly())
	return &ipamv1.UpdateBGPPeerResponse{BgpPeer: peerOut(m)}, err
}

func (f *fakeIPAM) DeleteBGPPeer(_ context.Context, req *ipamv1.DeleteBGPPeerRequest) (*ipamv1.DeleteBGPPeerResponse, error) {
	return &ipamv1.DeleteBGPPeerResponse{}, configDelete(f, req.GetName(), req.GetEtag())
}

func (f *fakeIPAM) CreateBFDProfile(_ context.Context, req *ipamv1.CreateBFDProfileRequest) (*ipamv1.CreateBFDProfileResponse, error) {
	m, err := configCreate(f, req.GetParent(), "bfdProfiles", req.GetBfdProfileId(), req.GetBfdProfile(), req.GetValidateOnly())
	return &ipamv1.CreateBFDProfileResponse{BfdProfile: m}, err
}

func (f *fakeIPAM) GetBFDProfile(_ context.Context, req *ipamv1.GetBFDProfileRequest) (*ipamv1.GetBFDProfileResponse, error) {
	m, err := configGet[*ipamv1.BFDProfile](f, req.GetName())
	return &ipamv1.GetBFDProfileResponse{BfdProfile: m}, err
}

func (f *fakeIPAM) ListBFDProfiles(_ context.Context, req *ipamv1.ListBFDProfilesRequest) (*ipamv1.ListBFDProfilesResponse, error) {
	ms, next, err := configList[*ipamv1.BFDProfile](f, req.GetParent(), "bfdProfiles", req.GetPageToken(), req.GetPageSize())
	return &ipamv1.ListBFDProfilesResponse{BfdProfiles: ms, NextPageToken: next}, err
}

func (f *fakeIPAM) UpdateBFDProfile(_ context.Context, req *ipamv1.UpdateBFDProfileRequest) (*ipamv1.UpdateBFDProfileResponse, error) {
	m, err := configUpdate(f, req.GetBfdProfile(), req.GetUpdateMask().GetPaths(), req.GetValidateOnly())
	return &ipamv1.UpdateBFDProfileResponse{BfdProfile: m}, err
}

func (f *fakeIPAM) DeleteBFDProfile(_ context.Context, req *ipamv1.DeleteBFDProfileRequest) (*ipamv1.DeleteBFDProfileResponse, error) {
	return &ipamv1.DeleteBFDProfileResponse{}, configDelete(f, req.GetName(), req.GetEtag())
}

func (f *fakeIPAM) CreateCommunity(_ context.Context, req *ipamv1.CreateCommunityRequest) (*ipamv1.CreateCommunityResponse, error) {
	m, err := configCreate(f, req.GetParent(), "communities", req.GetCommunityId(), req.GetCommunity(), req.GetValidateOnly())
	return &ipamv1.CreateCommunityResponse{Community: m}, err
}

func (f *fakeIPAM) GetCommunity(_ context.Context, req *ipamv1.GetCommunityRequest) (*ipamv1.GetCommunityResponse, error) {
	m, err := configGet[*ipamv1.Community](f, req.GetName())
	return &ipamv1.GetCommunityResponse{Community: m}, err
}

func (f *fakeIPAM) ListCommunities(_ context.Context, req *ipamv1.ListCommunitiesRequest) (*ipamv1.ListCommunitiesResponse, error) {
	ms, next, err := configList[*ipamv1.Community](f, req.GetParent(), "communities", req.GetPageToken(), req.GetPageSize())
	return &ipamv1.ListCommunitiesResponse{Communities: ms, NextPageToken: next}, err
}

func (f *fakeIPAM) UpdateCommunity(_ context.Context, req *ipamv1.UpdateCommunityRequest) (*ipamv1.UpdateCommunityResponse, error) {
	m, err := configUpdate(f, req.GetCommunity(), req.GetUpdateMask().GetPaths(), req.GetValidateOnly())
	return &ipamv1.UpdateCommunityResponse{Community: m}, err
}

func (f *fakeIPAM) DeleteCommunity(_ context.Context, req *ipamv1.DeleteCommunityRequest) (*ipamv1.DeleteCommunityResponse, error) {
	return &ipamv1.DeleteCommunityResponse{}, configDelete(f, req.GetName(), req.GetEtag())
}

func (f *fakeIPAM) CreateNode(_ context.Context, req *ipamv1.CreateNodeRequest) (*ipamv1.CreateNodeResponse, error) {
	m, err := configCreate(f, req.GetParent(), "nodes", req.GetNodeId(), req.GetNode(), req.GetValidateOnly())
	return &ipamv1.CreateNodeResponse{Node: m}, err
}

func (f *fakeIPAM) GetNode(_ context.Context, req *ipamv1.GetNodeRequest) (*ipamv1.GetNodeResponse, error) {
	m, err := configGet[*ipamv1.Node](f, req.GetName())
	return &ipamv1.GetNodeResponse{Node: m}, err
}

func (f *fakeIPAM) ListNodes(_ context.Context, req *ipamv1.ListNodesRequest) (*ipamv1.ListNodesResponse, error) {
	ms, next, err := configList[*ipamv1.Node](f, req.GetParent(), "nodes", req.GetPageToken(), req.GetPageSize())
	return &ipamv1.ListNodesResponse{Nodes: ms, NextPageToken: next}, err
}

func (f *fakeIPAM) UpdateNode(_ context.Context, req *ipamv1.UpdateNodeRequest) (*ipamv1.UpdateNodeResponse, error) {
	m, err := configUpdate(f, req.GetNode(), req.GetUpdateMask().GetPaths(), req.GetValidateOnly())
	return &ipamv1.UpdateNodeResponse{Node: m}, err
}

func (f *fakeIPAM) DeleteNode(_ context.Context, req *ipamv1.DeleteNodeRequest) (*ipamv1.DeleteNodeResponse, error) {
	return &ipamv1.DeleteNodeResponse{}, configDelete(f, req.GetName(), req.GetEtag())
}

func (f *fakeIPAM) GetAnnouncer(_ context.Context, req *ipamv1.GetAnnouncerRequest) (*ipamv1.GetAnnouncerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.announcers[req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "announcer %s is not subscribed", req.GetName())
	}
	return &ipamv1.GetAnnouncerResponse{Announcer: a}, nil
}

func (f *fakeIPAM) ListAnnouncers(_ context.Context, req *ipamv1.ListAnnouncersRequest) (*ipamv1.ListAnnouncersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// As the server, list only the live ones: a node drained while away
	// is found by GetAnnouncer only.
	var all []*ipamv1.Announcer
	for _, name := range slices.Sorted(maps.Keys(f.announcers)) {
		if (req.GetParent() == "tenants/-" || strings.HasPrefix(name, req.GetParent()+"/")) && f.announcers[name].GetLive() {
			all = append(all, f.announcers[name])
		}
	}
	anns, next, err := page(all, req.GetPageToken(), int(req.GetPageSize()), f.pageSize)
	if err != nil {
		return nil, err
	}
	return &ipamv1.ListAnnouncersResponse{Announcers: anns, NextPageToken: next}, nil
}

// DrainAnnouncer marks the node drained, as the server does even for a
// node that is not subscribed.
func (f *fakeIPAM) DrainAnnouncer(_ context.Context, req *ipamv1.DrainAnnouncerRequest) (*ipamv1.DrainAnnouncerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.announcers[req.GetName()]
	if !ok {
		a = &ipamv1.Announcer{Name: req.GetName()}
	}
	a = proto.Clone(a).(*ipamv1.Announcer)
	a.Draining = true
	f.announcers[a.Name] = a
	return &ipamv1.DrainAnnouncerResponse{Announcer: a}, nil
}

// UndrainAnnouncer ends the drain. As the server, it then fails with
// NotFound if the node is not subscribed, although the drain did end.
func (f *fakeIPAM) UndrainAnnouncer(_ context.Context, req *ipamv1.UndrainAnnouncerRequest) (*ipamv1.UndrainAnnouncerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.announcers[req.GetName()]
	if !ok || !a.GetLive() {
		delete(f.announcers, req.GetName())
		return nil, status.Errorf(codes.NotFound, "announcer %s is not subscribed", req.GetName())
	}
	a = proto.Clone(a).(*ipamv1.Announcer)
	a.Draining = false
	f.announcers[a.Name] = a
	return &ipamv1.UndrainAnnouncerResponse{Announcer: a}, nil
}

func (f *fakeIPAM) UpdateAllocation(_ context.Context, req *ipamv1.UpdateAllocationRequest) (*ipamv1.UpdateAllocationResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := req.GetAllocation()
	cur, ok := f.allocs[in.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "allocation %s not found", in.GetName())
	}
	if in.GetEtag() != "" && in.GetEtag() != cur.GetEtag() {
		return nil, status.Errorf(codes.Aborted, "allocation %s changed: etag %s, not %s", in.GetName(), cur.GetEtag(), in.GetEtag())
	}
	a := proto.Clone(cur).(*ipamv1.Allocation)
	for _, p := range req.GetUpdateMask().GetPaths() {
		switch p {
		case "owner_labels":
			a.OwnerLabels = in.GetOwnerLabels()
		case "namespace_labels":
			a.NamespaceLabels = in.GetNamespaceLabels()
		case "ports":
			a.Ports = in.GetPorts()
		case "traffic_policy":
			a.TrafficPolicy = in.GetTrafficPolicy()
		case "endpoint_nodes":
			a.EndpointNodes = in.GetEndpointNodes()
		case "ttl":
			a.Ttl = in.GetTtl()
		default:
			return nil, status.Errorf(codes.InvalidArgument, "%q cannot be updated", p)
		}
	}
	a.Etag = cur.GetEtag() + "+"
	f.allocs[a.Name] = a
	return &ipamv1.UpdateAllocationResponse{Allocation: a}, nil
}
