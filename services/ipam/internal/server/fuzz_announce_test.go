package server

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// FuzzCommunityValue checks that the IPAM's validation of a community
// value and the parsers the planner uses agree, and that a value the
// planner parsed survives the way a plan renders it for the announcer:
// communityProblem accepts exactly what ipam.ParseStandardCommunity or
// ipam.ParseLargeCommunity parse; a BGPAdvertisement takes a value that is
// an alias (an ID) or a valid literal and refuses any other with an error
// naming communities[0]; a Community alias takes only valid literals.
func FuzzCommunityValue(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		problem := communityProblem(s)
		var rendered string
		if ipam.IsLargeCommunity(s) {
			v, err := ipam.ParseLargeCommunity(s)
			if (err == nil) != (problem == "") {
				t.Fatalf("%q: communityProblem %q, ParseLargeCommunity error %v", s, problem, err)
			}
			if err == nil {
				rendered = largeStrings([][3]uint32{v})[0]
				again, err := ipam.ParseLargeCommunity("large:" + rendered)
				if err != nil || again != v {
					t.Fatalf("%q = %v renders as %q, which parses as %v, %v", s, v, rendered, again, err)
				}
			}
		} else {
			v, err := ipam.ParseStandardCommunity(s)
			if (err == nil) != (problem == "") {
				t.Fatalf("%q: communityProblem %q, ParseStandardCommunity error %v", s, problem, err)
			}
			if err == nil {
				rendered = communityStrings([]uint32{v})[0]
				again, err := ipam.ParseStandardCommunity(rendered)
				if err != nil || again != v {
					t.Fatalf("%q = %d renders as %q, which parses as %d, %v", s, v, rendered, again, err)
				}
			}
		}

		var fes ipam.FieldErrors
		bgpAdvFromProto(&fes, "bgp_advertisement", &ipamv1.BGPAdvertisement{Communities: []string{s}})
		wantOK := problem == "" || validID(s)
		if wantOK != (len(fes) == 0) {
			t.Fatalf("BGPAdvertisement with community %q: errors %v, want accepted %v", s, fes, wantOK)
		}
		for _, fe := range fes {
			if fe.Field != "bgp_advertisement.communities[0]" || fe.Reason == "" {
				t.Fatalf("BGPAdvertisement with community %q: error %v does not name the community", s, fe)
			}
		}

		fes = nil
		communityFromProto(&fes, "community", &ipamv1.Community{Aliases: []*ipamv1.CommunityAlias{{Name: "a", Value: s}}})
		if (problem == "") != (len(fes) == 0) {
			t.Fatalf("Community alias value %q: errors %v, want accepted %v", s, fes, problem == "")
		}
		for _, fe := range fes {
			if fe.Field != "community.aliases[0].value" || fe.Reason == "" {
				t.Fatalf("Community alias value %q: error %v does not name the value", s, fe)
			}
		}
	})
}

// configRoundTrip checks one announcement config kind on arbitrary wire
// bytes: every refusal names a field of the resource with a reason, and an
// accepted resource renders (with its secrets) to a message that is
// accepted again as the same resource.
func configRoundTrip[P proto.Message, D any](t *testing.T, k *configKind[P, D], b []byte) {
	t.Helper()
	var zero P
	in := zero.ProtoReflect().New().Interface().(P)
	if proto.Unmarshal(b, in) != nil {
		return
	}
	var fes ipam.FieldErrors
	d := k.from(&fes, k.field, in)
	for _, fe := range fes {
		if !strings.HasPrefix(fe.Field, k.field+".") || fe.Reason == "" {
			t.Fatalf("%s: field error %+v does not name a field of the resource with a reason", k.collection, fe)
		}
	}
	if len(fes) > 0 {
		return
	}
	out := k.full(d)
	var fes2 ipam.FieldErrors
	d2 := k.from(&fes2, k.field, out)
	if len(fes2) > 0 {
		t.Fatalf("%s: accepted %v, rendered as %v, which is refused: %v", k.collection, in, out, fes2)
	}
	if diff := cmp.Diff(d, d2, cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{}), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("%s: accepted %v, rendered as %v, which reads back differently (-first +again):\n%s", k.collection, in, out, diff)
	}
}

// FuzzAnnouncementRequest feeds arbitrary wire bytes, decoded as an
// L2Advertisement, BGPAdvertisement, BGPPeer, BFDProfile, Community or
// Node, to the IPAM's validation of that resource (see configRoundTrip).
func FuzzAnnouncementRequest(f *testing.F) {
	a := newAnnouncementService(nil)
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		switch kind % 6 {
		case 0:
			configRoundTrip(t, a.l2, b)
		case 1:
			configRoundTrip(t, a.bgpAdv, b)
		case 2:
			configRoundTrip(t, a.peer, b)
		case 3:
			configRoundTrip(t, a.bfd, b)
		case 4:
			configRoundTrip(t, a.community, b)
		case 5:
			configRoundTrip(t, a.node, b)
		}
	})
}

// FuzzAnnouncerHello decodes arbitrary wire bytes as the hello an
// announcer opens its Subscribe stream with and checks the parts the IPAM
// parses: the parent, the node name and the interfaces. Every refusal
// names a hello field; an accepted node name renders back in an announcer
// name; accepted interfaces have names of 1-15 bytes without '/' or spaces
// and addresses that are valid prefixes.
func FuzzAnnouncerHello(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		h := &ipamv1.SubscribeHello{}
		if proto.Unmarshal(b, h) != nil {
			return
		}
		var fes ipam.FieldErrors
		tenant := parseParent(&fes, "hello.parent", h.GetParent(), false)
		itfs := interfacesFromProto(&fes, "hello.interfaces", h.GetInterfaces())
		for _, fe := range fes {
			if !strings.HasPrefix(fe.Field, "hello.") || fe.Reason == "" {
				t.Fatalf("field error %+v does not name a hello field with a reason", fe)
			}
		}
		if validNodeName(h.GetNode()) && tenant != "" {
			var nfes ipam.FieldErrors
			name := "tenants/" + tenant + "/announcers/" + h.GetNode()
			if gt, gn := parseAnnouncerName(&nfes, name); gt != tenant || gn != h.GetNode() || len(nfes) > 0 {
				t.Fatalf("announcer %q of %q: name %q parses as %q, %q, %v", h.GetNode(), tenant, name, gt, gn, nfes)
			}
		}
		if len(fes) > 0 {
			return
		}
		if len(itfs) != len(h.GetInterfaces()) {
			t.Fatalf("accepted %d interfaces of %d", len(itfs), len(h.GetInterfaces()))
		}
		for _, itf := range itfs {
			if itf.Name == "" || len(itf.Name) > 15 || strings.ContainsAny(itf.Name, "/ \t\n") {
				t.Fatalf("accepted interface name %q", itf.Name)
			}
			for _, p := range itf.Addrs {
				if !p.IsValid() {
					t.Fatalf("accepted interface address %v", p)
				}
			}
		}
	})
}
