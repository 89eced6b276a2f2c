package replica_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

func TestAnnouncementConfigCRUD(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	conn, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ann := ipamv1.NewAnnouncementServiceClient(conn)
	ctx := ctxT(t)

	// Validation: every bad field named.
	_, err = ann.CreateBGPPeer(ctx, &ipamv1.CreateBGPPeerRequest{Parent: "tenants/c1", BgpPeerId: "r1", BgpPeer: &ipamv1.BGPPeer{
		PeerAddress: "192.0.2.1", HoldTime: durationpb.New(1e9), Password: "x", PasswordFile: "/etc/pw",
	}})
	wantCode(t, err, codes.InvalidArgument)
	want := []string{"bgp_peer.my_asn", "bgp_peer.peer_asn", "bgp_peer.hold_time", "bgp_peer.password_file"}
	if diff := cmp.Diff(want, violations(err)); diff != "" {
		t.Fatalf("violations (-want +got):\n%s", diff)
	}
	_, err = ann.CreateBGPPeer(ctx, &ipamv1.CreateBGPPeerRequest{Parent: "tenants/c1", BgpPeerId: "r1", BgpPeer: &ipamv1.BGPPeer{
		MyAsn: 64500, PeerAsn: 64501, PeerAddress: "192.0.2.1", HoldTime: durationpb.New(9e9), KeepaliveTime: durationpb.New(9e9),
	}})
	if diff := cmp.Diff([]string{"bgp_peer.keepalive_time"}, violations(err)); diff != "" {
		t.Fatalf("keepalive >= hold not refused: %s", diff)
	}
	_, err = ann.CreateBGPAdvertisement(ctx, &ipamv1.CreateBGPAdvertisementRequest{Parent: "tenants/c1", BgpAdvertisementId: "a", BgpAdvertisement: &ipamv1.BGPAdvertisement{
		Communities: []string{"65000:70000", "large:1:2", "no-export"}, AggregationLength: 33,
	}})
	if diff := cmp.Diff([]string{"bgp_advertisement.communities[0]", "bgp_advertisement.communities[1]", "bgp_advertisement.aggregation_length"}, violations(err)); diff != "" {
		t.Fatalf("advertisement violations (-want +got):\n%s", diff)
	}

	// Create, read (no password), update with a mask (password kept), delete.
	bfd, err := ann.CreateBFDProfile(ctx, &ipamv1.CreateBFDProfileRequest{Parent: "tenants/c1", BfdProfileId: "fast", BfdProfile: &ipamv1.BFDProfile{
		ReceiveInterval: durationpb.New(50e6), TransmitInterval: durationpb.New(50e6),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if bfd.GetBfdProfile().GetDetectMultiplier() != 3 {
		t.Errorf("detect multiplier default = %d", bfd.GetBfdProfile().GetDetectMultiplier())
	}
	peer, err := ann.CreateBGPPeer(ctx, &ipamv1.CreateBGPPeerRequest{Parent: "tenants/c1", BgpPeerId: "r1", BgpPeer: &ipamv1.BGPPeer{
		MyAsn: 64500, PeerAsn: 64501, PeerAddress: "192.0.2.1", Password: "s3cret", BfdProfile: "fast",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if p := peer.GetBgpPeer(); p.GetPassword() != "" || !p.GetHasPassword() || p.GetName() != "tenants/c1/bgpPeers/r1" {
		t.Fatalf("created peer = %v", p)
	}
	_, err = ann.CreateBGPPeer(ctx, &ipamv1.CreateBGPPeerRequest{Parent: "tenants/c1", BgpPeerId: "r1", BgpPeer: peer.GetBgpPeer()})
	wantCode(t, err, codes.AlreadyExists)
	up, err := ann.UpdateBGPPeer(ctx, &ipamv1.UpdateBGPPeerRequest{
		BgpPeer:    &ipamv1.BGPPeer{Name: "tenants/c1/bgpPeers/r1", PeerAsn: 64999, Etag: peer.GetBgpPeer().GetEtag()},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"peer_asn"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if up.GetBgpPeer().GetPeerAsn() != 64999 || !up.GetBgpPeer().GetHasPassword() || up.GetBgpPeer().GetMyAsn() != 64500 {
		t.Fatalf("update = %v", up.GetBgpPeer())
	}
	_, err = ann.DeleteBFDProfile(ctx, &ipamv1.DeleteBFDProfileRequest{Name: "tenants/c1/bfdProfiles/fast"})
	wantCode(t, err, codes.FailedPrecondition) // r1 uses it
	if _, err := ann.DeleteBGPPeer(ctx, &ipamv1.DeleteBGPPeerRequest{Name: "tenants/c1/bgpPeers/r1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ann.DeleteBFDProfile(ctx, &ipamv1.DeleteBFDProfileRequest{Name: "tenants/c1/bfdProfiles/fast"}); err != nil {
		t.Fatal(err)
	}

	l2, err := ann.CreateL2Advertisement(ctx, &ipamv1.CreateL2AdvertisementRequest{Parent: "tenants/c1", L2AdvertisementId: "lan", L2Advertisement: &ipamv1.L2Advertisement{
		Pools: []string{"pools/web"}, Interfaces: []string{"eth0"},
		NodePriorities: []*ipamv1.NodePriority{{Priority: 10, NodeSelector: &ipamv1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// The advertisement names a pool that does not exist: flagged, not
	// refused (as soon as the replica's view has seen it).
	var got *ipamv1.GetL2AdvertisementResponse
	waitFor(t, "a warning condition", func() bool {
		got, err = ann.GetL2Advertisement(ctx, &ipamv1.GetL2AdvertisementRequest{Name: l2.GetL2Advertisement().GetName()})
		return err == nil && len(got.GetL2Advertisement().GetConditions()) > 0
	})
	if c := got.GetL2Advertisement().GetConditions(); c[0].GetStatus() {
		t.Fatalf("no warning condition for an unknown pool: %v", c)
	} else {
		t.Logf("condition: %s: %s", c[0].GetReason(), c[0].GetMessage())
	}
	list, err := ann.ListL2Advertisements(ctx, &ipamv1.ListL2AdvertisementsRequest{Parent: "tenants/-"})
	if err != nil || len(list.GetL2Advertisements()) != 1 || list.GetL2Advertisements()[0].GetName() != l2.GetL2Advertisement().GetName() {
		t.Fatalf("list = %v, %v", list, err)
	}
}
