package server

import (
	"context"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// announcementService serves the announcement config resources through the
// generic config handlers, one kind descriptor each.
type announcementService struct {
	ipamv1.UnsafeAnnouncementServiceServer
	s         *Server
	l2        *configKind[*ipamv1.L2Advertisement, *ipam.L2Advertisement]
	bgpAdv    *configKind[*ipamv1.BGPAdvertisement, *ipam.BGPAdvertisement]
	peer      *configKind[*ipamv1.BGPPeer, *ipam.BGPPeer]
	bfd       *configKind[*ipamv1.BFDProfile, *ipam.BFDProfile]
	community *configKind[*ipamv1.Community, *ipam.Community]
	node      *configKind[*ipamv1.Node, *ipam.ClusterNode]
}

func newAnnouncementService(s *Server) *announcementService {
	return &announcementService{
		s: s,
		l2: &configKind[*ipamv1.L2Advertisement, *ipam.L2Advertisement]{
			kind: ipam.KindL2Advertisement, collection: "l2Advertisements", field: "l2_advertisement",
			updatable: []string{"pools", "pool_selectors", "node_selectors", "interfaces", "owner_selectors", "node_priorities"},
			from:      l2FromProto, to: l2ToProto,
			full: func(d *ipam.L2Advertisement) *ipamv1.L2Advertisement { return l2ToProto(d, 0) },
			meta: func(d *ipam.L2Advertisement) configMeta {
				return configMeta{&d.Tenant, &d.ID, &d.UID, &d.CreateTime, &d.UpdateTime}
			},
		},
		bgpAdv: &configKind[*ipamv1.BGPAdvertisement, *ipam.BGPAdvertisement]{
			kind: ipam.KindBGPAdvertisement, collection: "bgpAdvertisements", field: "bgp_advertisement",
			updatable: []string{"pools", "pool_selectors", "node_selectors", "peers", "communities", "local_pref", "aggregation_length", "aggregation_length_v6", "owner_selectors"},
			from:      bgpAdvFromProto, to: bgpAdvToProto,
			full: func(d *ipam.BGPAdvertisement) *ipamv1.BGPAdvertisement { return bgpAdvToProto(d, 0) },
			meta: func(d *ipam.BGPAdvertisement) configMeta {
				return configMeta{&d.Tenant, &d.ID, &d.UID, &d.CreateTime, &d.UpdateTime}
			},
		},
		peer: &configKind[*ipamv1.BGPPeer, *ipam.BGPPeer]{
			kind: ipam.KindBGPPeer, collection: "bgpPeers", field: "bgp_peer",
			updatable: []string{"my_asn", "peer_asn", "peer_address", "peer_port", "source_address", "router_id", "hold_time", "keepalive_time", "connect_time", "password", "password_file", "ebgp_multihop", "graceful_restart", "node_selectors", "bfd_profile"},
			from:      peerFromProto,
			to:        func(d *ipam.BGPPeer, rev int64) *ipamv1.BGPPeer { return peerToProto(d, rev, false) },
			full:      func(d *ipam.BGPPeer) *ipamv1.BGPPeer { return peerToProto(d, 0, true) },
			meta: func(d *ipam.BGPPeer) configMeta {
				return configMeta{&d.Tenant, &d.ID, &d.UID, &d.CreateTime, &d.UpdateTime}
			},
		},
		bfd: &configKind[*ipamv1.BFDProfile, *ipam.BFDProfile]{
			kind: ipam.KindBFDProfile, collection: "bfdProfiles", field: "bfd_profile",
			updatable: []string{"receive_interval", "transmit_interval", "detect_multiplier", "echo_mode", "echo_interval", "passive_mode", "minimum_ttl"},
			from:      bfdFromProto, to: bfdToProto,
			full: func(d *ipam.BFDProfile) *ipamv1.BFDProfile { return bfdToProto(d, 0) },
			meta: func(d *ipam.BFDProfile) configMeta {
				return configMeta{&d.Tenant, &d.ID, &d.UID, &d.CreateTime, &d.UpdateTime}
			},
			users: ipam.KindBGPPeer,
			inUse: func(id string) func(any) bool {
				return func(u any) bool { return u.(*ipam.BGPPeer).BFDProfile == id }
			},
		},
		community: &configKind[*ipamv1.Community, *ipam.Community]{
			kind: ipam.KindCommunity, collection: "communities", field: "community",
			updatable: []string{"aliases"},
			from:      communityFromProto, to: communityToProto,
			full: func(d *ipam.Community) *ipamv1.Community { return communityToProto(d, 0) },
			meta: func(d *ipam.Community) configMeta {
				return configMeta{&d.Tenant, &d.ID, &d.UID, &d.CreateTime, &d.UpdateTime}
			},
		},
		node: &configKind[*ipamv1.Node, *ipam.ClusterNode]{
			kind: ipam.KindClusterNode, collection: "nodes", field: "node",
			updatable: []string{"labels"},
			from:      nodeFromProto, to: nodeToProto,
			full: func(d *ipam.ClusterNode) *ipamv1.Node { return nodeToProto(d, 0) },
			meta: func(d *ipam.ClusterNode) configMeta {
				return configMeta{&d.Tenant, &d.ID, &d.UID, &d.CreateTime, &d.UpdateTime}
			},
			nameID: validNodeName, nameRule: nodeNameRule,
		},
	}
}

func (a *announcementService) CreateL2Advertisement(ctx context.Context, req *ipamv1.CreateL2AdvertisementRequest) (*ipamv1.CreateL2AdvertisementResponse, error) {
	p, err := configCreate(ctx, a.s, a.l2, "CreateL2Advertisement", req.GetParent(), req.GetL2AdvertisementId(), req.GetL2Advertisement(), req.GetRequestId(), req.GetValidateOnly(), req)
	if err != nil {
		return nil, err
	}
	return &ipamv1.CreateL2AdvertisementResponse{L2Advertisement: p}, nil
}

func (a *announcementService) GetL2Advertisement(ctx context.Context, req *ipamv1.GetL2AdvertisementRequest) (*ipamv1.GetL2AdvertisementResponse, error) {
	p, err := configGet(ctx, a.s, a.l2, "GetL2Advertisement", req.GetName())
	if err != nil {
		return nil, err
	}
	return &ipamv1.GetL2AdvertisementResponse{L2Advertisement: p}, nil
}

func (a *announcementService) ListL2Advertisements(ctx context.Context, req *ipamv1.ListL2AdvertisementsRequest) (*ipamv1.ListL2AdvertisementsResponse, error) {
	ps, next, err := configList(ctx, a.s, a.l2, "ListL2Advertisements", req.GetParent(), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &ipamv1.ListL2AdvertisementsResponse{L2Advertisements: ps, NextPageToken: next}, nil
}

func (a *announcementService) UpdateL2Advertisement(ctx context.Context, req *ipamv1.UpdateL2AdvertisementRequest) (*ipamv1.UpdateL2AdvertisementResponse, error) {
	p, err := configUpdate(ctx, a.s, a.l2, "UpdateL2Advertisement", req.GetL2Advertisement(), req.GetUpdateMask().GetPaths(), req.GetRequestId(), req.GetValidateOnly(), req)
	if err != nil {
		return nil, err
	}
	return &ipamv1.UpdateL2AdvertisementResponse{L2Advertisement: p}, nil
}

func (a *announcementService) DeleteL2Advertisement(ctx context.Context, req *ipamv1.DeleteL2AdvertisementRequest) (*ipamv1.DeleteL2AdvertisementResponse, error) {
	if err := configDelete(ctx, a.s, a.l2, "DeleteL2Advertisement", req.GetName(), req.GetEtag(), req.GetRequestId(), req); err != nil {
		return nil, err
	}
	return &ipamv1.DeleteL2AdvertisementResponse{}, nil
}

func (a *announcementService) CreateBGPAdvertisement(ctx context.Context, req *ipamv1.CreateBGPAdvertisementRequest) (*ipamv1.CreateBGPAdvertisementResponse, error) {
	p, err := configCreate(ctx, a.s, a.bgpAdv, "CreateBGPAdvertisement", req.GetParent(), req.GetBgpAdvertisementId(), req.GetBgpAdvertisement(), req.GetRequestId(), req.GetValidateOnly(), req)
	if err != nil {
		return nil, err
	}
	return &ipamv1.CreateBGPAdvertisementResponse{BgpAdvertisement: p}, nil
}

func (a *announcementService) GetBGPAdvertisement(ctx context.Context, req *ipamv1.GetBGPAdvertisementRequest) (*ipamv1.GetBGPAdvertisementResponse, error) {
	p, err := configGet(ctx, a.s, a.bgpAdv, "GetBGPAdvertisement", req.GetName())
	if err != nil {
		return nil, err
	}
	return &ipamv1.GetBGPAdvertisementResponse{BgpAdvertisement: p}, nil
}

func (a *announcementService) ListBGPAdvertisements(ctx context.Context, req *ipamv1.ListBGPAdvertisementsRequest) (*ipamv1.ListBGPAdvertisementsResponse, error) {
	ps, next, err := configList(ctx, a.s, a.bgpAdv, "ListBGPAdvertisements", req.GetParent(), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &ipamv1.ListBGPAdvertisementsResponse{BgpAdvertisements: ps, NextPageToken: next}, nil
}

func (a *announcementService) UpdateBGPAdvertisement(ctx context.Context, req *ipamv1.UpdateBGPAdvertisementRequest) (*ipamv1.UpdateBGPAdvertisementResponse, error) {
	p, err := configUpdate(ctx, a.s, a.bgpAdv, "UpdateBGPAdvertisement", req.GetBgpAdvertisement(), req.GetUpdateMask().GetPaths(), req.GetRequestId(), req.GetValidateOnly(), req)
	if err != nil {
		return nil, err
	}
	return &ipamv1.UpdateBGPAdvertisementResponse{BgpAdvertisement: p}, nil
}

func (a *announcementService) DeleteBGPAdvertisement(ctx context.Context, req *ipamv1.DeleteBGPAdvertisementRequest) (*ipamv1.DeleteBGPAdvertisementResponse, error) {
	if err := configDelete(ctx, a.s, a.bgpAdv, "DeleteBGPAdvertisement", req.GetName(), req.GetEtag(), req.GetRequestId(), req); err != nil {
		return nil, err
	}
	return &ipamv1.DeleteBGPAdvertisementResponse{}, nil
}

func (a *announcementService) CreateBGPPeer(ctx context.Context, req *ipamv1.CreateBGPPeerRequest) (*ipamv1.CreateBGPPeerResponse, error) {
	p, err := configCreate(ctx, a.s, a.peer, "CreateBGPPeer", req.GetParent(), req.GetBgpPeerId(), req.GetBgpPeer(), req.GetRequestId(), req.GetValidateOnly(), req)
	if err != nil {
		return nil, err
	}
	return &ipamv1.CreateBGPPeerResponse{BgpPeer: p}, nil
}

func (a *announcementService) GetBGPPeer(ctx context.Context, req *ipamv1.GetBGPPeerRequest) (*ipamv1.GetBGPPeerResponse, error) {
	p, err := configGet(ctx, a.s, a.peer, "GetBGPPeer", req.GetName())
	if err != nil {
		return nil, err
	}
	return &ipamv1.GetBGPPeerResponse{BgpPeer: p}, nil
}

func (a *announcementService) ListBGPPeers(ctx context.Context, req *ipamv1.ListBGPPeersRequest) (*ipamv1.ListBGPPeersResponse, error) {
	ps, next, err := configList(ctx, a.s, a.peer, "ListBGPPeers", req.GetParent(), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &ipamv1.ListBGPPeersResponse{BgpPeers: ps, NextPageToken: next}, nil
}

func (a *announcementService) UpdateBGPPeer(ctx context.Context, req *ipamv1.UpdateBGPPeerRequest) (*ipamv1.UpdateBGPPeerResponse, error) {
	p, err := configUpdate(ctx, a.s, a.peer, "UpdateBGPPeer", req.GetBgpPeer(), req.GetUpdateMask().GetPaths(), req.GetRequestId(), req.GetValidateOnly(), req)
	if err != nil {
		return nil, err
	}
	return &ipamv1.UpdateBGPPeerResponse{BgpPeer: p}, nil
}

func (a *announcementService) DeleteBGPPeer(ctx context.Context, req *ipamv1.DeleteBGPPeerRequest) (*ipamv1.DeleteBGPPeerResponse, error) {
	if err := configDelete(ctx, a.s, a.peer, "DeleteBGPPeer", req.GetName(), req.GetEtag(), req.GetRequestId(), req); err != nil {
		return nil, err
	}
	return &ipamv1.DeleteBGPPeerResponse{}, nil
}

func (a *announcementService) CreateBFDProfile(ctx context.Context, req *ipamv1.CreateBFDProfileRequest) (*ipamv1.CreateBFDProfileResponse, error) {
	p, err := configCreate(ctx, a.s, a.bfd, "CreateBFDProfile", req.GetParent(), req.GetBfdProfileId(), req.GetBfdProfile(), req.GetRequestId(), req.GetValidateOnly(), req)
	if err != nil {
		return nil, err
	}
	return &ipamv1.CreateBFDProfileResponse{BfdProfile: p}, nil
}

func (a *announcementService) GetBFDProfile(ctx context.Context, req *ipamv1.GetBFDProfileRequest) (*ipamv1.GetBFDProfileResponse, error) {
	p, err := configGet(ctx, a.s, a.bfd, "GetBFDProfile", req.GetName())
	if err != nil {
		return nil, err
	}
	return &ipamv1.GetBFDProfileResponse{BfdProfile: p}, nil
}

func (a *announcementService) ListBFDProfiles(ctx context.Context, req *ipamv1.ListBFDProfilesRequest) (*ipamv1.ListBFDProfilesResponse, error) {
	ps, next, err := configList(ctx, a.s, a.bfd, "ListBFDProfiles", req.GetParent(), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &ipamv1.ListBFDProfilesResponse{BfdProfiles: ps, NextPageToken: next}, nil
}

func (a *announcementService) UpdateBFDProfile(ctx context.Context, req *ipamv1.UpdateBFDProfileRequest) (*ipamv1.UpdateBFDProfileResponse, error) {
	p, err := configUpdate(ctx, a.s, a.bfd, "UpdateBFDProfile", req.GetBfdProfile(), req.GetUpdateMask().GetPaths(), req.GetRequestId(), req.GetValidateOnly(), req)
	if err != nil {
		return nil, err
	}
	return &ipamv1.UpdateBFDProfileResponse{BfdProfile: p}, nil
}

func (a *announcementService) DeleteBFDProfile(ctx context.Context, req *ipamv1.DeleteBFDProfileRequest) (*ipamv1.DeleteBFDProfileResponse, error) {
	if err := configDelete(ctx, a.s, a.bfd, "DeleteBFDProfile", req.GetName(), req.GetEtag(), req.GetRequestId(), req); err != nil {
		return nil, err
	}
	return &ipamv1.DeleteBFDProfileResponse{}, nil
}

func (a *announcementService) CreateCommunity(ctx context.Context, req *ipamv1.CreateCommunityRequest) (*ipamv1.CreateCommunityResponse, error) {
	p, err := configCreate(ctx, a.s, a.community, "CreateCommunity", req.GetParent(), req.GetCommunityId(), req.GetCommunity(), req.GetRequestId(), req.GetValidateOnly(), req)
	if err != nil {
		return nil, err
	}
	return &ipamv1.CreateCommunityResponse{Community: p}, nil
}

func (a *announcementService) GetCommunity(ctx context.Context, req *ipamv1.GetCommunityRequest) (*ipamv1.GetCommunityResponse, error) {
	p, err := configGet(ctx, a.s, a.community, "GetCommunity", req.GetName())
	if err != nil {
		return nil, err
	}
	return &ipamv1.GetCommunityResponse{Community: p}, nil
}

func (a *announcementService) ListCommunities(ctx context.Context, req *ipamv1.ListCommunitiesRequest) (*ipamv1.ListCommunitiesResponse, error) {
	ps, next, err := configList(ctx, a.s, a.community, "ListCommunities", req.GetParent(), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &ipamv1.ListCommunitiesResponse{Communities: ps, NextPageToken: next}, nil
}

func (a *announcementService) UpdateCommunity(ctx context.Context, req *ipamv1.UpdateCommunityRequest) (*ipamv1.UpdateCommunityResponse, error) {
	p, err := configUpdate(ctx, a.s, a.community, "UpdateCommunity", req.GetCommunity(), req.GetUpdateMask().GetPaths(), req.GetRequestId(), req.GetValidateOnly(), req)
	if err != nil {
		return nil, err
	}
	return &ipamv1.UpdateCommunityResponse{Community: p}, nil
}

func (a *announcementService) DeleteCommunity(ctx context.Context, req *ipamv1.DeleteCommunityRequest) (*ipamv1.DeleteCommunityResponse, error) {
	if err := configDelete(ctx, a.s, a.community, "DeleteCommunity", req.GetName(), req.GetEtag(), req.GetRequestId(), req); err != nil {
		return nil, err
	}
	return &ipamv1.DeleteCommunityResponse{}, nil
}

func (a *announcementService) CreateNode(ctx context.Context, req *ipamv1.CreateNodeRequest) (*ipamv1.CreateNodeResponse, error) {
	p, err := configCreate(ctx, a.s, a.node, "CreateNode", req.GetParent(), req.GetNodeId(), req.GetNode(), req.GetRequestId(), req.GetValidateOnly(), req)
	if err != nil {
		return nil, err
	}
	return &ipamv1.CreateNodeResponse{Node: p}, nil
}

func (a *announcementService) GetNode(ctx context.Context, req *ipamv1.GetNodeRequest) (*ipamv1.GetNodeResponse, error) {
	p, err := configGet(ctx, a.s, a.node, "GetNode", req.GetName())
	if err != nil {
		return nil, err
	}
	return &ipamv1.GetNodeResponse{Node: p}, nil
}

func (a *announcementService) ListNodes(ctx context.Context, req *ipamv1.ListNodesRequest) (*ipamv1.ListNodesResponse, error) {
	ps, next, err := configList(ctx, a.s, a.node, "ListNodes", req.GetParent(), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &ipamv1.ListNodesResponse{Nodes: ps, NextPageToken: next}, nil
}

func (a *announcementService) UpdateNode(ctx context.Context, req *ipamv1.UpdateNodeRequest) (*ipamv1.UpdateNodeResponse, error) {
	p, err := configUpdate(ctx, a.s, a.node, "UpdateNode", req.GetNode(), req.GetUpdateMask().GetPaths(), req.GetRequestId(), req.GetValidateOnly(), req)
	if err != nil {
		return nil, err
	}
	return &ipamv1.UpdateNodeResponse{Node: p}, nil
}

func (a *announcementService) DeleteNode(ctx context.Context, req *ipamv1.DeleteNodeRequest) (*ipamv1.DeleteNodeResponse, error) {
	if err := configDelete(ctx, a.s, a.node, "DeleteNode", req.GetName(), req.GetEtag(), req.GetRequestId(), req); err != nil {
		return nil, err
	}
	return &ipamv1.DeleteNodeResponse{}, nil
}
