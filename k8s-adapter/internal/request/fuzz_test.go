package request

import (
	"cmp"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// FuzzServiceRequest builds the allocation request of a LoadBalancer
// Service from arbitrary annotations (under any of the three prefixes) and
// spec fields. A refusal is an *Error with a known reason and a message; a
// request is deterministic, and what it asks for keeps the IPAM's rules:
// requested addresses written canonically (no zone, no v4-mapped form), at
// most one per family and of the Service's families, at most one with
// SingleStack, a pool named pools/ID without blanks, and ports sorted and
// distinct.
func FuzzServiceRequest(f *testing.F) {
	prefixes := []string{PrefixBeacon, PrefixMetalLB, PrefixDeprecated}
	f.Fuzz(func(t *testing.T, which uint8, ips, lbIP, pool, shared, families, policy, etp string, p1 int32, proto1 string, p2 int32, proto2 string) {
		s := &Service{
			Namespace: "ns", Name: "svc", UID: "u1", Type: "LoadBalancer",
			Annotations: map[string]string{}, LoadBalancerIP: lbIP,
			IPFamilyPolicy: policy, ExternalTrafficPolicy: etp,
			Ports: []Port{{Port: p1, Protocol: proto1}, {Port: p2, Protocol: proto2}},
		}
		if families != "" {
			s.IPFamilies = strings.Split(families, ",")
		}
		p := prefixes[int(which)%len(prefixes)]
		if which&4 == 0 {
			s.Annotations[p+LoadBalancerIPs] = ips
		}
		if which&8 == 0 {
			s.Annotations[p+AddressPool] = pool
		}
		if which&16 == 0 {
			s.Annotations[prefixes[int(which>>5)%len(prefixes)]+AllowSharedIP] = shared
		}
		a, warns, err := Build(s, Options{EndpointNodes: []string{"n2", "n1", "n2"}})
		for _, w := range warns {
			if w.Reason == "" || w.Message == "" {
				t.Fatalf("warning without reason or message: %+v", w)
			}
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Message == "" || (e.Reason != "InvalidAnnotation" && e.Reason != "InvalidService") {
				t.Fatalf("Build error %#v, want an *Error with a known reason", err)
			}
			if a != nil {
				t.Fatalf("Build returned %v with error %v", a, err)
			}
			return
		}
		again, _, err := Build(s, Options{EndpointNodes: []string{"n2", "n1", "n2"}})
		if err != nil || !proto.Equal(a, again) {
			t.Fatalf("Build is not deterministic: %v, then %v, %v", a, again, err)
		}
		if a.GetOwner() != "ns/svc" || a.GetOwnerUid() != "u1" {
			t.Fatalf("owner %q uid %q", a.GetOwner(), a.GetOwnerUid())
		}
		fams := map[ipamv1.IPFamily]bool{}
		for _, f := range a.GetIpFamilies() {
			fams[f] = true
		}
		single := a.GetIpFamilyPolicy() == ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_SINGLE_STACK
		if single && len(a.GetIpFamilies()) > 1 {
			t.Fatalf("SingleStack with families %v", a.GetIpFamilies())
		}
		seen := map[bool]bool{}
		for _, r := range a.GetRequestedAddresses() {
			addr, err := netip.ParseAddr(r)
			if err != nil || addr.String() != r || addr.Zone() != "" || addr.Is4In6() || seen[addr.Is4()] {
				t.Fatalf("requested addresses %q (from %q, %q)", a.GetRequestedAddresses(), ips, lbIP)
			}
			seen[addr.Is4()] = true
			f := ipamv1.IPFamily_IP_FAMILY_IPV6
			if addr.Is4() {
				f = ipamv1.IPFamily_IP_FAMILY_IPV4
			}
			if len(fams) > 0 && !fams[f] {
				t.Fatalf("requested %s outside families %v", addr, a.GetIpFamilies())
			}
		}
		if single && len(a.GetRequestedAddresses()) > 1 {
			t.Fatalf("SingleStack with requested addresses %q", a.GetRequestedAddresses())
		}
		if rp := a.GetRequestedPool(); rp != "" {
			id, ok := strings.CutPrefix(rp, "pools/")
			if !ok || id == "" || strings.TrimSpace(id) != id {
				t.Fatalf("requested pool %q (from %q)", rp, pool)
			}
		}
		for i := 1; i < len(a.GetPorts()); i++ {
			x, y := a.GetPorts()[i-1], a.GetPorts()[i]
			if c := cmp.Or(cmp.Compare(x.GetPort(), y.GetPort()), cmp.Compare(x.GetProtocol(), y.GetProtocol())); c >= 0 {
				t.Fatalf("ports not sorted and distinct: %v", a.GetPorts())
			}
		}
		if a.GetTrafficPolicy() == ipamv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL && strings.Join(a.GetEndpointNodes(), ",") != "n1,n2" {
			t.Fatalf("endpoint nodes %v", a.GetEndpointNodes())
		}
	})
}
