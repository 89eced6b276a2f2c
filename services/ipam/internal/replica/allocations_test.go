package replica_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/beaconlb/beacon/pkg/testwait"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

// allocsNode starts a replica on the etcd shared by this file.
func allocsNode(t *testing.T, opts replica.Options) *node {
	return startNode(t, sharedEtcd(t, "allocations").client, opts)
}

func TestAllocateLowestFreeAddress(t *testing.T) {
	n := allocsNode(t, replica.Options{})
	const tenant = "low"
	mustPool(t, n, "low", &ipamv1.Pool{Ranges: []string{"198.51.100.8/29", "198.51.100.0/29"}, Tenants: []string{tenant}})
	var got []string
	for i := range 3 {
		got = append(got, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: fmt.Sprintf("o%d", i)})...)
	}
	diff(t, "first three", []string{"198.51.100.0", "198.51.100.1", "198.51.100.2"}, got)
	releaseOwner(t, n, tenant, "o1")
	diff(t, "after o1 left", []string{"198.51.100.1"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "o3"}))
	diff(t, "next", []string{"198.51.100.3"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "o4"}))
	// A replica that starts now, from what etcd holds, picks the same way.
	other := allocsNode(t, replica.Options{})
	diff(t, "other replica", []string{"198.51.100.4"}, addrsOf(t, other, tenant, &ipamv1.Allocation{Owner: "o5"}))
}

func TestAllocateIsIdempotentPerOwner(t *testing.T) {
	n := allocsNode(t, replica.Options{})
	const tenant = "idem"
	mustPool(t, n, "idem", &ipamv1.Pool{Ranges: []string{"198.51.100.16/29", "2001:db8:20::/120"}, Tenants: []string{tenant}})
	req := &ipamv1.Allocation{Owner: "ns/web", IpFamilyPolicy: requireDual, Namespace: "ns", OwnerLabels: map[string]string{"app": "web"}}
	first, err := n.allocs.Allocate(ctxT(t), &ipamv1.AllocateRequest{Parent: "tenants/" + tenant, Allocation: req})
	if err != nil {
		t.Fatal(err)
	}
	if !first.GetCreated() {
		t.Errorf("first call: created false")
	}
	diff(t, "addresses", []string{"198.51.100.16", "2001:db8:20::"}, first.GetAllocation().GetAddresses())
	other := allocsNode(t, replica.Options{})
	for _, n := range []*node{n, other} {
		again, err := n.allocs.Allocate(ctxT(t), &ipamv1.AllocateRequest{Parent: "tenants/" + tenant, Allocation: req})
		if err != nil {
			t.Fatal(err)
		}
		if again.GetCreated() {
			t.Errorf("second call: created true")
		}
		diff(t, "second call", first.GetAllocation(), again.GetAllocation(), protocmp.Transform())
	}
	// A narrower request the allocation satisfies returns it too.
	again := mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "ns/web", IpFamilyPolicy: preferDual})
	diff(t, "prefer-dual-stack", first.GetAllocation().GetAddresses(), again.GetAddresses())
	// A request it cannot satisfy is refused, not silently answered.
	_, err = allocate(ctxT(t), n, tenant, &ipamv1.Allocation{Owner: "ns/web", RequestedAddresses: []string{"198.51.100.20"}})
	wantStatus(t, err, codes.FailedPrecondition, "release it first")
	list, err := n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/" + tenant})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetAllocations()) != 1 {
		t.Errorf("%d allocations, want 1", len(list.GetAllocations()))
	}
}

func TestAllocateRequestID(t *testing.T) {
	n := allocsNode(t, replica.Options{})
	const tenant = "reqid"
	mustPool(t, n, "reqid", &ipamv1.Pool{Ranges: []string{"198.51.100.24/29"}, Tenants: []string{tenant}})
	req := &ipamv1.AllocateRequest{Parent: "tenants/" + tenant, RequestId: "req-1", Allocation: &ipamv1.Allocation{Owner: "r1"}}
	first, err := n.allocs.Allocate(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	// The retry gets the first result, created included, even though the
	// owner now holds the allocation.
	again, err := n.allocs.Allocate(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "replay", first, again, protocmp.Transform())
	if !again.GetCreated() {
		t.Errorf("replay: created false, want the first result's true")
	}
	// The same request_id for another request is refused, and nothing is
	// allocated for it.
	_, err = n.allocs.Allocate(ctxT(t), &ipamv1.AllocateRequest{Parent: "tenants/" + tenant, RequestId: "req-1", Allocation: &ipamv1.Allocation{Owner: "r2"}})
	wantStatus(t, err, codes.InvalidArgument, "req-1")
	if got := reason(err); got != "REQUEST_ID_REUSED" {
		t.Errorf("reason %q, want REQUEST_ID_REUSED", got)
	}
	_, err = n.allocs.GetAllocation(ctxT(t), &ipamv1.GetAllocationRequest{Name: nameOf(tenant, "r2")})
	wantStatus(t, err, codes.NotFound)
	// A request_id names one request: a release may not reuse it either.
	_, err = n.allocs.Release(ctxT(t), &ipamv1.ReleaseRequest{Parent: "tenants/" + tenant, Owner: "r1", RequestId: "req-1"})
	wantStatus(t, err, codes.InvalidArgument)

	// Release replays too: the retry of a release that succeeded reports
	// the same addresses instead of NotFound.
	rel := &ipamv1.ReleaseRequest{Parent: "tenants/" + tenant, Owner: "r1", RequestId: "rel-1", Hold: dur(0)}
	r1 := mustRelease(t, n, rel)
	r2 := mustRelease(t, n, rel)
	diff(t, "release replay", r1, r2, protocmp.Transform())
	diff(t, "released", []string{"198.51.100.24"}, r1.GetAddresses())
}

func TestAllocateSpecificAddress(t *testing.T) {
	n := allocsNode(t, replica.Options{})
	const tenant = "spec"
	mustPool(t, n, "spec", &ipamv1.Pool{Ranges: []string{"198.51.100.32/29", "2001:db8:21::/120"}, Tenants: []string{tenant}})
	diff(t, "requested", []string{"198.51.100.34"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "s1", RequestedAddresses: []string{"198.51.100.34"}}))
	diff(t, "both families", []string{"2001:db8:21::7", "198.51.100.37"}, addrsOf(t, n, tenant, &ipamv1.Allocation{
		Owner: "s2", IpFamilyPolicy: requireDual, RequestedAddresses: []string{"2001:db8:21::7", "198.51.100.37"},
	}))

	for _, tc := range []struct {
		name   string
		req    *ipamv1.Allocation
		reason string
		msg    string
	}{
		{"in use by another owner", &ipamv1.Allocation{Owner: "s3", RequestedAddresses: []string{"198.51.100.34"}}, "ADDRESS_IN_USE", "198.51.100.34"},
		{"in no pool", &ipamv1.Allocation{Owner: "s3", RequestedAddresses: []string{"203.0.113.200"}}, "ADDRESS_NOT_IN_POOL", "203.0.113.200"},
		{"in the pool but not the requested pool", &ipamv1.Allocation{Owner: "s3", RequestedAddresses: []string{"198.51.100.33"}, RequestedPool: "pools/spec-other"}, "NOT_ALLOWED", "spec-other"},
		{"dual-stack needs both", &ipamv1.Allocation{Owner: "s3", IpFamilyPolicy: requireDual, RequestedAddresses: []string{"198.51.100.33"}}, "NOT_ALLOWED", "require-dual-stack"},
		{"one of two in use", &ipamv1.Allocation{Owner: "s3", IpFamilyPolicy: requireDual, RequestedAddresses: []string{"198.51.100.33", "2001:db8:21::7"}}, "ADDRESS_IN_USE", "2001:db8:21::7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := allocate(ctxT(t), n, tenant, tc.req)
			wantStatus(t, err, codes.FailedPrecondition, tc.msg)
			if got := reason(err); got != tc.reason {
				t.Errorf("reason %q, want %q", got, tc.reason)
			}
		})
	}
	// Refusals took nothing: the lowest free addresses are still free.
	diff(t, "lowest", []string{"198.51.100.32"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "s4"}))
	diff(t, "next", []string{"198.51.100.33"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "s5"}))
	diff(t, "skips the requested one", []string{"198.51.100.35"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "s6"}))
}

func TestAllocateFromSpecificPool(t *testing.T) {
	n := allocsNode(t, replica.Options{})
	const tenant = "pick"
	mustPool(t, n, "pick-a", &ipamv1.Pool{Ranges: []string{"198.51.100.40/30"}, Tenants: []string{tenant}})
	mustPool(t, n, "pick-b", &ipamv1.Pool{Ranges: []string{"198.51.100.44/30"}, Tenants: []string{tenant}})
	al := mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "p1"})
	if al.GetPool() != "pools/pick-a" {
		t.Errorf("unnamed: pool %s, want pools/pick-a (name order)", al.GetPool())
	}
	al = mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "p2", RequestedPool: "pools/pick-b"})
	diff(t, "named", []string{"198.51.100.44"}, al.GetAddresses())
	if al.GetPool() != "pools/pick-b" || al.GetRequestedPool() != "pools/pick-b" {
		t.Errorf("pool %s requested_pool %s, want pools/pick-b", al.GetPool(), al.GetRequestedPool())
	}
	_, err := allocate(ctxT(t), n, tenant, &ipamv1.Allocation{Owner: "p3", RequestedPool: "pools/pick-none"})
	wantStatus(t, err, codes.NotFound, "pick-none")
	// A full requested pool is exhausted even though another pool has room.
	for i := range 3 {
		mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: fmt.Sprintf("fill-%d", i), RequestedPool: "pools/pick-b"})
	}
	_, err = allocate(ctxT(t), n, tenant, &ipamv1.Allocation{Owner: "p4", RequestedPool: "pools/pick-b"})
	wantStatus(t, err, codes.ResourceExhausted)
}

func TestAllocateFamilies(t *testing.T) {
	n := allocsNode(t, replica.Options{})
	mustPool(t, n, "fam-dual", &ipamv1.Pool{Ranges: []string{"198.51.100.48/29", "2001:db8:22::/120"}, Tenants: []string{"fam"}})
	mustPool(t, n, "fam-v4", &ipamv1.Pool{Ranges: []string{"198.51.100.56/29"}, Tenants: []string{"fam4"}})
	// Two IPv6 addresses, so that IPv6 runs out while IPv4 does not.
	mustPool(t, n, "fam-tight", &ipamv1.Pool{Ranges: []string{"198.51.100.64/29", "2001:db8:23::/127"}, Tenants: []string{"famtight"}})

	for _, tc := range []struct {
		name   string
		tenant string
		req    *ipamv1.Allocation
		want   []string
		code   codes.Code
		msg    string
	}{
		{"IPv4 only", "fam", &ipamv1.Allocation{IpFamilies: []ipamv1.IPFamily{fam4}}, []string{"198.51.100.48"}, codes.OK, ""},
		{"IPv6 only", "fam", &ipamv1.Allocation{IpFamilies: []ipamv1.IPFamily{fam6}}, []string{"2001:db8:22::"}, codes.OK, ""},
		{"unspecified: IPv4 first", "fam", &ipamv1.Allocation{}, []string{"198.51.100.49"}, codes.OK, ""},
		{"require dual-stack", "fam", &ipamv1.Allocation{IpFamilyPolicy: requireDual}, []string{"198.51.100.50", "2001:db8:22::1"}, codes.OK, ""},
		{"require dual-stack, IPv6 primary", "fam", &ipamv1.Allocation{IpFamilyPolicy: requireDual, IpFamilies: []ipamv1.IPFamily{fam6, fam4}}, []string{"2001:db8:22::2", "198.51.100.51"}, codes.OK, ""},
		{"prefer dual-stack from a dual-stack pool", "fam", &ipamv1.Allocation{IpFamilyPolicy: preferDual}, []string{"198.51.100.52", "2001:db8:22::3"}, codes.OK, ""},
		{"prefer dual-stack falls back to IPv4", "fam4", &ipamv1.Allocation{IpFamilyPolicy: preferDual}, []string{"198.51.100.56"}, codes.OK, ""},
		// Refusals that no release could ever lift are not "exhausted".
		{"prefer dual-stack with IPv6 first needs IPv6", "fam4", &ipamv1.Allocation{IpFamilyPolicy: preferDual, IpFamilies: []ipamv1.IPFamily{fam6}}, nil, codes.FailedPrecondition, "no candidate pool has IPv6 addresses"},
		{"require dual-stack from IPv4-only pools", "fam4", &ipamv1.Allocation{IpFamilyPolicy: requireDual}, nil, codes.FailedPrecondition, "no candidate pool has both IPv4 and IPv6 addresses"},
		{"IPv6 from IPv4-only pools", "fam4", &ipamv1.Allocation{IpFamilies: []ipamv1.IPFamily{fam6}}, nil, codes.FailedPrecondition, "no candidate pool has IPv6 addresses"},
		{"IPv6 from an IPv4-only pool by name", "fam4", &ipamv1.Allocation{IpFamilies: []ipamv1.IPFamily{fam6}, RequestedPool: "pools/fam-v4"}, nil, codes.FailedPrecondition, "no candidate pool has IPv6 addresses"},
		{"IPv6 runs out: first", "famtight", &ipamv1.Allocation{IpFamilies: []ipamv1.IPFamily{fam6}}, []string{"2001:db8:23::"}, codes.OK, ""},
		{"IPv6 runs out: second", "famtight", &ipamv1.Allocation{IpFamilies: []ipamv1.IPFamily{fam6}}, []string{"2001:db8:23::1"}, codes.OK, ""},
		{"require dual-stack takes both or nothing", "famtight", &ipamv1.Allocation{IpFamilyPolicy: requireDual}, nil, codes.ResourceExhausted, ""},
		{"prefer dual-stack takes what there is", "famtight", &ipamv1.Allocation{IpFamilyPolicy: preferDual}, []string{"198.51.100.64"}, codes.OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Owner = "fam/" + t.Name()
			got, err := allocate(ctxT(t), n, tc.tenant, req)
			if tc.code != codes.OK {
				wantStatus(t, err, tc.code, tc.msg)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			diff(t, "addresses", tc.want, got.GetAddresses())
		})
	}
	// The refused dual-stack request took no IPv4 address.
	diff(t, "tight pool", []string{
		"IP_FAMILY_IPV4 size=8 used=1 free=7",
		"IP_FAMILY_IPV6 size=2 used=2 free=0",
	}, usage(getPool(t, n, "fam-tight")))
}

func TestPoolChoiceByPolicy(t *testing.T) {
	n := allocsNode(t, replica.Options{})
	const tenant = "prio"
	sel := func(k, v string) []*ipamv1.LabelSelector {
		return []*ipamv1.LabelSelector{{MatchLabels: map[string]string{k: v}}}
	}
	// Created in an order unlike their priorities, to show that names and
	// creation order do not decide.
	mustPool(t, n, "prio-a-nopolicy", &ipamv1.Pool{Ranges: []string{"198.51.100.72/30"}, Tenants: []string{tenant}})
	mustPool(t, n, "prio-b-unset", &ipamv1.Pool{Ranges: []string{"198.51.100.76/30"}, Tenants: []string{tenant},
		AllocationPolicy: &ipamv1.AllocationPolicy{NamespaceSelectors: sel("team", "blue")}})
	mustPool(t, n, "prio-c-two", &ipamv1.Pool{Ranges: []string{"198.51.100.80/30"}, Tenants: []string{tenant},
		AllocationPolicy: &ipamv1.AllocationPolicy{Priority: 2, OwnerSelectors: sel("tier", "gold")}})
	mustPool(t, n, "prio-d-one", &ipamv1.Pool{Ranges: []string{"198.51.100.84/30"}, Tenants: []string{tenant},
		AllocationPolicy: &ipamv1.AllocationPolicy{Priority: 1, Namespaces: []string{"web"}}})
	// A priority-1 pool for another tenant is never a candidate.
	mustPool(t, n, "prio-e-other", &ipamv1.Pool{Ranges: []string{"198.51.100.88/30"}, Tenants: []string{"prio-other"},
		AllocationPolicy: &ipamv1.AllocationPolicy{Priority: 1}})

	gold := map[string]string{"tier": "gold"}
	blue := map[string]string{"team": "blue"}
	for _, tc := range []struct {
		name string
		req  *ipamv1.Allocation
		pool string
	}{
		{"priority 1 beats 2 beats unset", &ipamv1.Allocation{Namespace: "web", OwnerLabels: gold, NamespaceLabels: blue}, "prio-d-one"},
		{"2 beats unset", &ipamv1.Allocation{Namespace: "api", OwnerLabels: gold, NamespaceLabels: blue}, "prio-c-two"},
		{"unset beats no policy", &ipamv1.Allocation{Namespace: "api", NamespaceLabels: blue}, "prio-b-unset"},
		{"no matching policy: pools without policy", &ipamv1.Allocation{Namespace: "api", OwnerLabels: map[string]string{"tier": "silver"}}, "prio-a-nopolicy"},
		{"namespace alone", &ipamv1.Allocation{Namespace: "web"}, "prio-d-one"},
		{"owner selector alone", &ipamv1.Allocation{OwnerLabels: gold}, "prio-c-two"},
		// prio-d-one (4 addresses) is full after these two.
		{"fill priority 1 (3)", &ipamv1.Allocation{Namespace: "web"}, "prio-d-one"},
		{"fill priority 1 (4)", &ipamv1.Allocation{Namespace: "web"}, "prio-d-one"},
		{"full priority pool falls through", &ipamv1.Allocation{Namespace: "web", OwnerLabels: gold}, "prio-c-two"},
		{"full priority pool falls through to no policy", &ipamv1.Allocation{Namespace: "web"}, "prio-a-nopolicy"},
		{"a matching owner may name a policy pool", &ipamv1.Allocation{OwnerLabels: gold, RequestedPool: "pools/prio-c-two"}, "prio-c-two"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Owner = "prio/" + t.Name()
			got, err := allocate(ctxT(t), n, tenant, req)
			if err != nil {
				t.Fatal(err)
			}
			if got.GetPool() != "pools/"+tc.pool {
				t.Errorf("pool %s, want pools/%s", got.GetPool(), tc.pool)
			}
		})
	}
	// A policy says whom the pool serves, also to owners that name it or
	// one of its addresses.
	for _, tc := range []struct {
		name string
		req  *ipamv1.Allocation
	}{
		{"pool by name, namespace labels do not match", &ipamv1.Allocation{Namespace: "api", RequestedPool: "pools/prio-b-unset"}},
		{"pool by name, no owner labels", &ipamv1.Allocation{RequestedPool: "pools/prio-c-two"}},
		{"address, namespace labels do not match", &ipamv1.Allocation{Namespace: "api", RequestedAddresses: []string{"198.51.100.78"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Owner = "prio/" + t.Name()
			_, err := allocate(ctxT(t), n, tenant, req)
			wantStatus(t, err, codes.FailedPrecondition, "allocation policy of pool")
		})
	}
}

func TestPoolTenants(t *testing.T) {
	n := allocsNode(t, replica.Options{})
	mustPool(t, n, "ten-x", &ipamv1.Pool{Ranges: []string{"198.51.100.92/30"}, Tenants: []string{"ten-a", "ten-c"}})
	diff(t, "allowed tenant", []string{"198.51.100.92"}, addrsOf(t, n, "ten-a", &ipamv1.Allocation{Owner: "same-owner"}))
	diff(t, "other allowed tenant, same owner name", []string{"198.51.100.93"}, addrsOf(t, n, "ten-c", &ipamv1.Allocation{Owner: "same-owner"}))
	for _, tc := range []struct {
		name string
		req  *ipamv1.Allocation
		msg  string
	}{
		{"no pool serves the tenant", &ipamv1.Allocation{Owner: "o"}, `tenant "ten-b"`},
		{"pool by name", &ipamv1.Allocation{Owner: "o", RequestedPool: "pools/ten-x"}, `tenant "ten-b" may not draw from pool "ten-x"`},
		{"address in the pool", &ipamv1.Allocation{Owner: "o", RequestedAddresses: []string{"198.51.100.94"}}, `tenant "ten-b" may not draw from pool "ten-x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := allocate(ctxT(t), n, "ten-b", tc.req)
			wantStatus(t, err, codes.FailedPrecondition, tc.msg)
		})
	}
	// Tenants never see each other's allocations.
	_, err := n.allocs.GetAllocation(ctxT(t), &ipamv1.GetAllocationRequest{Name: nameOf("ten-b", "same-owner")})
	wantStatus(t, err, codes.NotFound)
	list, err := n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/ten-a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetAllocations()) != 1 {
		t.Errorf("tenant ten-a lists %d allocations, want 1", len(list.GetAllocations()))
	}
}

// Owners with one sharing key share an address when their ports do not
// clash. An owner whose ports clash gets an address of its own, as in
// MetalLB, where the allocator walks the pool and takes the first address
// that is free or shareable; naming a clashing address is refused.
func TestSharing(t *testing.T) {
	n := allocsNode(t, replica.Options{})
	const tenant = "share"
	mustPool(t, n, "share", &ipamv1.Pool{Ranges: []string{"198.51.100.96/29"}, Tenants: []string{tenant}})
	tcp := func(p int32) *ipamv1.Port { return &ipamv1.Port{Port: p, Protocol: ipamv1.Protocol_PROTOCOL_TCP} }
	udp := func(p int32) *ipamv1.Port { return &ipamv1.Port{Port: p, Protocol: ipamv1.Protocol_PROTOCOL_UDP} }
	for _, tc := range []struct {
		owner string
		key   string
		ports []*ipamv1.Port
		want  string
	}{
		{"a", "k", []*ipamv1.Port{tcp(80)}, "198.51.100.96"},
		{"b", "k", []*ipamv1.Port{tcp(443)}, "198.51.100.96"},
		{"c-clash", "k", []*ipamv1.Port{tcp(80)}, "198.51.100.97"},
		{"d-udp", "k", []*ipamv1.Port{udp(80)}, "198.51.100.96"},
		{"e-nokey", "", []*ipamv1.Port{tcp(8080)}, "198.51.100.98"},
		{"f-otherkey", "other", []*ipamv1.Port{tcp(8080)}, "198.51.100.99"},
		{"g-noports", "k", nil, "198.51.100.100"},
		// Clashes with b on .96, not with c on .97.
		{"h", "k", []*ipamv1.Port{tcp(443), tcp(53)}, "198.51.100.97"},
	} {
		got := addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: tc.owner, SharingKey: tc.key, Ports: tc.ports})
		diff(t, "owner "+tc.owner, []string{tc.want}, got)
	}
	_, err := allocate(ctxT(t), n, tenant, &ipamv1.Allocation{Owner: "i", SharingKey: "k", Ports: []*ipamv1.Port{tcp(443)}, RequestedAddresses: []string{"198.51.100.96"}})
	wantStatus(t, err, codes.FailedPrecondition, "198.51.100.96")
	diff(t, "naming a shareable address", []string{"198.51.100.96"}, addrsOf(t, n, tenant, &ipamv1.Allocation{
		Owner: "j", SharingKey: "k", Ports: []*ipamv1.Port{tcp(8443)}, RequestedAddresses: []string{"198.51.100.96"},
	}))

	// The shared address is freed only when its last holder leaves, and is
	// not kept for a holder that leaves with a hold while others stay.
	resp := mustRelease(t, n, &ipamv1.ReleaseRequest{Parent: "tenants/" + tenant, Owner: "a", Hold: dur(time.Hour)})
	if resp.GetHoldExpireTime() != nil {
		t.Errorf("hold_expire_time %v though the shared address is not kept", resp.GetHoldExpireTime().AsTime())
	}
	for _, o := range []string{"a", "b", "d-udp"} {
		if o != "a" {
			releaseOwner(t, n, tenant, o)
		}
		diff(t, "after "+o+" left", []string{"198.51.100.101"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "probe"}))
		releaseOwner(t, n, tenant, "probe")
	}
	releaseOwner(t, n, tenant, "j")
	diff(t, "after the last left", []string{"198.51.100.96"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "probe"}))
}

func TestRelease(t *testing.T) {
	n := allocsNode(t, replica.Options{})
	const tenant = "rel"
	mustPool(t, n, "rel", &ipamv1.Pool{Ranges: []string{"198.51.100.104/29"}, Tenants: []string{tenant}})
	a := mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "by-name"})
	b := mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "by-owner"})
	if a.GetName() != nameOf(tenant, "by-name") {
		t.Errorf("name %s, want %s", a.GetName(), nameOf(tenant, "by-name"))
	}

	_, err := n.allocs.Release(ctxT(t), &ipamv1.ReleaseRequest{Name: a.GetName(), Etag: b.GetEtag()})
	wantStatus(t, err, codes.Aborted)
	resp := mustRelease(t, n, &ipamv1.ReleaseRequest{Name: a.GetName(), Etag: a.GetEtag()})
	diff(t, "by name", []string{"198.51.100.104"}, resp.GetAddresses())
	if resp.GetHoldExpireTime() != nil {
		t.Errorf("hold_expire_time set without a hold")
	}
	resp = mustRelease(t, n, &ipamv1.ReleaseRequest{Parent: "tenants/" + tenant, Owner: "by-owner"})
	diff(t, "by parent and owner", []string{"198.51.100.105"}, resp.GetAddresses())

	for _, req := range []*ipamv1.ReleaseRequest{
		{Name: a.GetName()},
		{Parent: "tenants/" + tenant, Owner: "by-owner"},
		{Parent: "tenants/" + tenant, Owner: "never-allocated"},
	} {
		_, err := n.allocs.Release(ctxT(t), req)
		wantStatus(t, err, codes.NotFound)
	}
	_, err = n.allocs.GetAllocation(ctxT(t), &ipamv1.GetAllocationRequest{Name: a.GetName()})
	wantStatus(t, err, codes.NotFound)
}

func TestReleaseHold(t *testing.T) {
	clk := &clock{}
	n := allocsNode(t, replica.Options{Now: clk.now})
	const tenant = "hold"
	mustPool(t, n, "hold", &ipamv1.Pool{Ranges: []string{"198.51.100.112/30"}, Tenants: []string{tenant}})
	first := mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "a"})
	diff(t, "a", []string{"198.51.100.112"}, first.GetAddresses())

	before := clk.now()
	resp := mustRelease(t, n, &ipamv1.ReleaseRequest{Parent: "tenants/" + tenant, Owner: "a", Hold: dur(time.Hour)})
	if got := resp.GetHoldExpireTime().AsTime(); got.Before(before.Add(time.Hour)) || got.After(clk.now().Add(time.Hour)) {
		t.Errorf("hold_expire_time %v, want an hour from now", got)
	}
	diff(t, "another owner does not get a held address", []string{"198.51.100.113"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "b"}))
	back, err := n.allocs.Allocate(ctxT(t), &ipamv1.AllocateRequest{Parent: "tenants/" + tenant, Allocation: &ipamv1.Allocation{Owner: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "the owner gets its address back", first.GetAddresses(), back.GetAllocation().GetAddresses())
	if back.GetAllocation().GetUid() != first.GetUid() {
		t.Errorf("uid %s, want the held allocation's %s", back.GetAllocation().GetUid(), first.GetUid())
	}

	// Hold 0 frees at once.
	releaseOwner(t, n, tenant, "b")
	diff(t, "hold 0", []string{"198.51.100.113"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "c"}))

	// A full pool reclaims a held address rather than failing.
	mustRelease(t, n, &ipamv1.ReleaseRequest{Parent: "tenants/" + tenant, Owner: "a", Hold: dur(time.Hour)})
	diff(t, "d", []string{"198.51.100.114"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "d"}))
	diff(t, "e", []string{"198.51.100.115"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "e"}))
	diff(t, "used with the hold", []string{"IP_FAMILY_IPV4 size=4 used=4 free=0"}, usage(getPool(t, n, "hold")))
	diff(t, "reclaimed", []string{"198.51.100.112"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "f"}))
	_, err = allocate(ctxT(t), n, tenant, &ipamv1.Allocation{Owner: "a"})
	wantStatus(t, err, codes.ResourceExhausted)

	// A hold ends by itself: the address is free again for anyone.
	releaseOwner(t, n, tenant, "e")
	mustRelease(t, n, &ipamv1.ReleaseRequest{Parent: "tenants/" + tenant, Owner: "d", Hold: dur(30 * time.Second)})
	diff(t, "held", []string{"IP_FAMILY_IPV4 size=4 used=3 free=1"}, usage(getPool(t, n, "hold")))
	clk.advance(31 * time.Second)
	eventually(t, 5*time.Second, "the hold to end", func() bool {
		return slices.Equal(usage(getPool(t, n, "hold")), []string{"IP_FAMILY_IPV4 size=4 used=2 free=2"})
	})
	diff(t, "after the hold", []string{"198.51.100.114"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "g"}))
	recs, err := n.audit.ListAuditRecords(ctxT(t), &ipamv1.ListAuditRecordsRequest{Parent: "tenants/" + tenant, Filter: `action = "HOLD_END"`})
	if err != nil {
		t.Fatal(err)
	}
	var ended []string
	for _, r := range recs.GetAuditRecords() {
		ended = append(ended, r.GetOwner()+" "+r.GetActor())
	}
	diff(t, "hold ends", []string{"d system"}, ended)
}

func TestAllocationTTL(t *testing.T) {
	clk := &clock{}
	n := allocsNode(t, replica.Options{Now: clk.now})
	// A second replica runs expiry too; each allocation still expires once,
	// and never at a time a renewal on the other replica pushed back.
	allocsNode(t, replica.Options{Now: clk.now})
	const tenant = "ttl"
	mustPool(t, n, "ttl", &ipamv1.Pool{Ranges: []string{"198.51.100.120/29"}, Tenants: []string{tenant}})
	short := mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "short", Ttl: dur(10 * time.Second)})
	long := mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "long", Ttl: dur(60 * time.Second)})
	forever := mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "forever"})
	if got := short.GetExpireTime().AsTime().Sub(short.GetCreateTime().AsTime()); got != 10*time.Second {
		t.Errorf("expire_time is %v after create_time, want 10s", got)
	}
	if forever.GetExpireTime() != nil || forever.GetTtl() != nil {
		t.Errorf("allocation without ttl has expire_time %v ttl %v", forever.GetExpireTime(), forever.GetTtl())
	}
	exists := func(al *ipamv1.Allocation) bool {
		_, err := n.allocs.GetAllocation(ctxT(t), &ipamv1.GetAllocationRequest{Name: al.GetName()})
		return err == nil
	}

	clk.advance(11 * time.Second)
	eventually(t, 5*time.Second, "the short allocation to expire", func() bool { return !exists(short) })
	if !exists(long) || !exists(forever) {
		t.Fatalf("other allocations expired too")
	}
	diff(t, "expired address is free", short.GetAddresses(), addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "next"}))

	// Renewing pushes the expiry back: past the first expiry it lives on.
	clk.advance(40 * time.Second) // long has 9s left
	renewed, err := n.allocs.RenewAllocation(ctxT(t), &ipamv1.RenewAllocationRequest{Name: long.GetName(), Etag: long.GetEtag()})
	if err != nil {
		t.Fatal(err)
	}
	if got := renewed.GetAllocation().GetExpireTime().AsTime(); !got.After(long.GetExpireTime().AsTime().Add(50 * time.Second)) {
		t.Errorf("renewed expire_time %v, want about 60s from now", got)
	}
	_, err = n.allocs.RenewAllocation(ctxT(t), &ipamv1.RenewAllocationRequest{Name: long.GetName(), Etag: long.GetEtag()})
	wantStatus(t, err, codes.Aborted)
	// A marker that expires with this step of the clock: once it is gone,
	// expiry has run past long's old expiry time.
	marker := mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "marker", Ttl: dur(10 * time.Second)})
	clk.advance(20 * time.Second) // past the first expiry and the marker's, 40s left
	eventually(t, 30*time.Second, "the marker to expire", func() bool { return !exists(marker) })
	if !exists(long) {
		t.Fatalf("renewed allocation expired at its old time")
	}
	// A renewal with its own ttl.
	renewed, err = n.allocs.RenewAllocation(ctxT(t), &ipamv1.RenewAllocationRequest{Name: long.GetName(), Ttl: dur(15 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if got := renewed.GetAllocation().GetTtl().AsDuration(); got != 15*time.Second {
		t.Errorf("ttl %v after renewal with 15s", got)
	}
	clk.advance(16 * time.Second)
	eventually(t, 5*time.Second, "the renewed allocation to expire", func() bool { return !exists(long) })

	_, err = n.allocs.RenewAllocation(ctxT(t), &ipamv1.RenewAllocationRequest{Name: forever.GetName()})
	wantStatus(t, err, codes.FailedPrecondition)
	if got := reason(err); got != "NO_TTL" {
		t.Errorf("reason %q, want NO_TTL", got)
	}
	_, err = n.allocs.RenewAllocation(ctxT(t), &ipamv1.RenewAllocationRequest{Name: short.GetName()})
	wantStatus(t, err, codes.NotFound)

	recs, err := n.audit.ListAuditRecords(ctxT(t), &ipamv1.ListAuditRecordsRequest{Parent: "tenants/" + tenant, Filter: `action = "EXPIRE"`})
	if err != nil {
		t.Fatal(err)
	}
	var expired []string
	for _, r := range recs.GetAuditRecords() {
		expired = append(expired, fmt.Sprintf("%s %s %v", r.GetOwner(), r.GetActor(), r.GetAddresses()))
	}
	diff(t, "expiry records, newest first", []string{
		"long system [198.51.100.121]",
		"marker system [198.51.100.123]",
		"short system [198.51.100.120]",
	}, expired)
}

func TestAuditRecords(t *testing.T) {
	n := allocsNode(t, replica.Options{})
	const tenant = "audit"
	mustPool(t, n, "audit", &ipamv1.Pool{Ranges: []string{"198.51.100.128/29"}, Tenants: []string{tenant}})
	alice, bob := asActor(ctxT(t), "alice"), asActor(ctxT(t), "bob")
	a, err := n.allocs.Allocate(alice, &ipamv1.AllocateRequest{Parent: "tenants/" + tenant, RequestId: "aud-1", Allocation: &ipamv1.Allocation{Owner: "ns/a"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.allocs.Release(bob, &ipamv1.ReleaseRequest{Parent: "tenants/" + tenant, Owner: "ns/a"}); err != nil {
		t.Fatal(err)
	}
	b := mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "ns/b"})
	// A refused request leaves no record.
	_, err = allocate(ctxT(t), n, tenant, &ipamv1.Allocation{Owner: "ns/c", RequestedAddresses: []string{"203.0.113.77"}})
	wantStatus(t, err, codes.FailedPrecondition)

	resp, err := n.audit.ListAuditRecords(ctxT(t), &ipamv1.ListAuditRecordsRequest{Parent: "tenants/" + tenant})
	if err != nil {
		t.Fatal(err)
	}
	want := []*ipamv1.AuditRecord{
		{Action: ipamv1.AuditRecord_ACTION_ALLOCATE, Actor: "anonymous", Allocation: b.GetName(), Owner: "ns/b", Addresses: []string{"198.51.100.128"}, Pool: "pools/audit"},
		{Action: ipamv1.AuditRecord_ACTION_RELEASE, Actor: "bob", Allocation: a.GetAllocation().GetName(), Owner: "ns/a", Addresses: []string{"198.51.100.128"}, Pool: "pools/audit"},
		{Action: ipamv1.AuditRecord_ACTION_ALLOCATE, Actor: "alice", Allocation: a.GetAllocation().GetName(), Owner: "ns/a", Addresses: []string{"198.51.100.128"}, Pool: "pools/audit", RequestId: "aud-1"},
	}
	diff(t, "records, newest first", want, resp.GetAuditRecords(), protocmp.Transform(),
		protocmp.IgnoreFields(&ipamv1.AuditRecord{}, "name", "time"))
	recs := resp.GetAuditRecords()
	for i := 1; i < len(recs); i++ {
		if recs[i].GetTime().AsTime().After(recs[i-1].GetTime().AsTime()) {
			t.Errorf("record %d is newer than record %d", i, i-1)
		}
	}

	for _, tc := range []struct {
		filter string
		want   []string
	}{
		{`action = "RELEASE"`, []string{"RELEASE bob"}},
		{`actor = "alice"`, []string{"ALLOCATE alice"}},
		{`owner = "ns/a"`, []string{"RELEASE bob", "ALLOCATE alice"}},
		{`pool = "pools/audit" AND action = "ALLOCATE"`, []string{"ALLOCATE anonymous", "ALLOCATE alice"}},
		{`address = "198.51.100.128"`, []string{"ALLOCATE anonymous", "RELEASE bob", "ALLOCATE alice"}},
		{`action = "EXPIRE"`, nil},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			var got []string
			token := ""
			for range 10 {
				resp, err := n.audit.ListAuditRecords(ctxT(t), &ipamv1.ListAuditRecordsRequest{Parent: "tenants/" + tenant, Filter: tc.filter, PageSize: 1, PageToken: token})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range resp.GetAuditRecords() {
					got = append(got, fmt.Sprintf("%s %s", r.GetAction().String()[len("ACTION_"):], r.GetActor()))
				}
				if token = resp.GetNextPageToken(); token == "" {
					break
				}
			}
			diff(t, "records", tc.want, got)
		})
	}
}

// The record of an allocation's creation is kept in the allocation until
// the allocation ends, then in the log: it keeps its name throughout, any
// replica lists it, and a listing paged across the release neither repeats
// nor misses it.
func TestAuditCreationRecordMovesToTheLog(t *testing.T) {
	env := sharedEtcd(t, "allocations")
	a := startNode(t, env.client, replica.Options{})
	b := startNode(t, env.dial(t), replica.Options{})
	const tenant = "auditmove"
	mustPool(t, a, "auditmove", &ipamv1.Pool{Ranges: []string{"2001:db8:a1::/120"}, Tenants: []string{tenant}})
	for i := range 4 {
		mustAllocate(t, a, tenant, &ipamv1.Allocation{Owner: fmt.Sprintf("o%d", i)})
	}
	list := func(n *node, size int32, token string) ([]string, string) {
		t.Helper()
		resp, err := n.audit.ListAuditRecords(ctxT(t), &ipamv1.ListAuditRecordsRequest{Parent: "tenants/" + tenant, PageSize: size, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range resp.GetAuditRecords() {
			out = append(out, r.GetAction().String()[len("ACTION_"):]+" "+r.GetOwner()+" "+r.GetName())
		}
		return out, resp.GetNextPageToken()
	}
	before, _ := list(a, 100, "")
	if len(before) != 4 {
		t.Fatalf("records before any release: %v", before)
	}
	// At once: a replica lists what etcd has committed, even if its watch
	// has not delivered it yet.
	got, _ := list(b, 100, "")
	diff(t, "the other replica's records", before, got)

	// Page through one record at a time, releasing every owner after the
	// first page: the ALLOCATE records move to the log meanwhile.
	first, token := list(a, 1, "")
	for i := range 4 {
		releaseOwner(t, a, tenant, fmt.Sprintf("o%d", i))
	}
	paged := first
	for token != "" {
		var page []string
		page, token = list(b, 1, token)
		paged = append(paged, page...)
	}
	var allocs []string
	for _, r := range paged {
		if strings.HasPrefix(r, "ALLOCATE ") {
			allocs = append(allocs, r)
		}
	}
	diff(t, "ALLOCATE records paged across the releases (names unchanged)", before, allocs)

	after, _ := list(a, 100, "")
	var released, allocated []string
	for _, r := range after {
		if strings.HasPrefix(r, "RELEASE ") {
			released = append(released, r)
		} else {
			allocated = append(allocated, r)
		}
	}
	diff(t, "ALLOCATE records after the releases", before, allocated)
	if len(released) != 4 {
		t.Fatalf("RELEASE records: %v", released)
	}
	got, _ = list(b, 100, "")
	diff(t, "the other replica's log", after, got)
}

// A replica lists the creation of an allocation committed through another
// replica at once, even before its own watch has delivered it.
func TestAuditListedAtOnceByAnotherReplica(t *testing.T) {
	env := sharedEtcd(t, "allocations")
	a := startNode(t, env.client, replica.Options{})
	b := startNode(t, env.dial(t), replica.Options{})
	const tenant = "auditonce"
	mustPool(t, a, "auditonce", &ipamv1.Pool{Ranges: []string{"2001:db8:a2::/120"}, Tenants: []string{tenant}})
	for i := range 40 {
		owner := fmt.Sprintf("o%02d", i)
		mustAllocate(t, a, tenant, &ipamv1.Allocation{Owner: owner})
		// Unavailable (the replica's index did not catch up with etcd in
		// its 2 s bound, on a loaded machine) says to retry; what must
		// never come is an answer without the record.
		var resp *ipamv1.ListAuditRecordsResponse
		var err error
		_ = testwait.Poll(ctxT(t), 30*time.Second, func() error {
			resp, err = b.audit.ListAuditRecords(ctxT(t), &ipamv1.ListAuditRecordsRequest{Parent: "tenants/" + tenant, PageSize: 1})
			if status.Code(err) == codes.Unavailable {
				return err
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetAuditRecords(); len(got) != 1 || got[0].GetOwner() != owner {
			t.Fatalf("allocation %d: the other replica's newest record is %v, want the creation of %s", i, got, owner)
		}
	}
}

// Owners with one sharing key that ask at the same instant, on one
// replica, share one address: the second waits for the first's commit
// instead of taking an address of its own.
func TestSharingConcurrent(t *testing.T) {
	n := allocsNode(t, replica.Options{})
	const tenant, owners = "sharec", 16
	mustPool(t, n, "sharec", &ipamv1.Pool{Ranges: []string{"2001:db8:5c::/120"}, Tenants: []string{tenant}})
	var wg sync.WaitGroup
	got := make([][]string, owners)
	errs := make([]error, owners)
	for i := range owners {
		wg.Go(func() {
			resp, err := allocate(ctxT(t), n, tenant, &ipamv1.Allocation{
				Owner: fmt.Sprintf("ns/svc-%02d", i), SharingKey: "shared",
				Ports: []*ipamv1.Port{{Port: int32(8000 + i), Protocol: ipamv1.Protocol_PROTOCOL_TCP}},
			})
			got[i], errs[i] = resp.GetAddresses(), err
		})
	}
	wg.Wait()
	for i := range owners {
		if errs[i] != nil {
			t.Fatalf("owner %d: %v", i, errs[i])
		}
		diff(t, fmt.Sprintf("owner %d's address", i), []string{"2001:db8:5c::"}, got[i])
	}
}

// Concurrent allocations are committed together and their audit records
// packed one key per transaction: the log still has every record exactly
// once, page after page, whatever the page size.
func TestAuditOfConcurrentAllocations(t *testing.T) {
	n := allocsNode(t, replica.Options{})
	const tenant, callers = "auditc", 48
	mustPool(t, n, "auditc", &ipamv1.Pool{Ranges: []string{"2001:db8:a0::/120"}, Tenants: []string{tenant}})
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Go(func() {
			_, err := allocate(ctxT(t), n, tenant, &ipamv1.Allocation{Owner: fmt.Sprintf("o%02d", i)})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := range callers {
		want = append(want, fmt.Sprintf("o%02d", i))
	}
	for _, size := range []int32{1, 5, 1000} {
		var got []string
		token := ""
		for range callers + 2 {
			resp, err := n.audit.ListAuditRecords(ctxT(t), &ipamv1.ListAuditRecordsRequest{Parent: "tenants/" + tenant, PageSize: size, PageToken: token})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range resp.GetAuditRecords() {
				got = append(got, r.GetOwner())
			}
			if token = resp.GetNextPageToken(); token == "" {
				break
			}
		}
		slices.Sort(got)
		diff(t, fmt.Sprintf("owners in the audit log, pages of %d", size), want, got)
	}
}

func TestListAllocations(t *testing.T) {
	n := allocsNode(t, replica.Options{})
	mustPool(t, n, "list-a", &ipamv1.Pool{Ranges: []string{"198.51.100.136/29"}, Tenants: []string{"list"}})
	mustPool(t, n, "list-b", &ipamv1.Pool{Ranges: []string{"198.51.100.144/29"}, Tenants: []string{"list"}, AutoAssign: boolp(false)})
	mustPool(t, n, "list-c", &ipamv1.Pool{Ranges: []string{"198.51.100.152/29"}, Tenants: []string{"list2"}})
	web := map[string]string{"app": "web"}
	mustAllocate(t, n, "list", &ipamv1.Allocation{Owner: "o1", OwnerLabels: web, Namespace: "front"})
	mustAllocate(t, n, "list", &ipamv1.Allocation{Owner: "o2", OwnerLabels: map[string]string{"app": "db"}, SharingKey: "k"})
	mustAllocate(t, n, "list", &ipamv1.Allocation{Owner: "o3", OwnerLabels: web, RequestedPool: "pools/list-b"})
	mustAllocate(t, n, "list2", &ipamv1.Allocation{Owner: "o1", OwnerLabels: web})

	for _, tc := range []struct {
		parent string
		filter string
		want   []string // owners
	}{
		{"tenants/list", "", []string{"o1", "o2", "o3"}},
		{"tenants/list", `pool = "pools/list-a"`, []string{"o1", "o2"}},
		{"tenants/list", `pool = "list-b"`, []string{"o3"}},
		{"tenants/list", `owner = "o2"`, []string{"o2"}},
		{"tenants/list", `owner = "o9"`, nil},
		{"tenants/list", `address = "198.51.100.144"`, []string{"o3"}},
		{"tenants/list", `labels.app = "web"`, []string{"o1", "o3"}},
		{"tenants/list", `labels.app:*`, []string{"o1", "o2", "o3"}},
		{"tenants/list", `labels.app = "web" AND pool = "pools/list-a"`, []string{"o1"}},
		{"tenants/list", `namespace = "front"`, []string{"o1"}},
		{"tenants/list", `sharing_key = "k"`, []string{"o2"}},
		{"tenants/list2", "", []string{"o1"}},
		{"tenants/-", `labels.app = "web" AND address = "198.51.100.152"`, []string{"o1"}},
	} {
		t.Run(tc.parent+" "+tc.filter, func(t *testing.T) {
			resp, err := n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: tc.parent, Filter: tc.filter})
			if err != nil {
				t.Fatal(err)
			}
			var got, names []string
			for _, al := range resp.GetAllocations() {
				got = append(got, al.GetOwner())
				names = append(names, al.GetName())
			}
			diff(t, "owners", tc.want, got, sortStrings)
			if !slices.IsSorted(names) {
				t.Errorf("not in name order: %v", names)
			}
			// The same in pages of one, in the same order.
			var paged []string
			token := ""
			for range 10 {
				resp, err := n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: tc.parent, Filter: tc.filter, PageSize: 1, PageToken: token})
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.GetAllocations()) > 1 {
					t.Fatalf("page of %d", len(resp.GetAllocations()))
				}
				for _, al := range resp.GetAllocations() {
					paged = append(paged, al.GetName())
				}
				if token = resp.GetNextPageToken(); token == "" {
					break
				}
			}
			diff(t, "pages of 1", names, paged)
		})
	}
}

// A write on one replica is seen at once by a call on another, whose index
// may not have caught up yet.
func TestReplicasAgreeAtOnce(t *testing.T) {
	a := allocsNode(t, replica.Options{})
	b := allocsNode(t, replica.Options{})
	const tenant = "agree"
	mustPool(t, a, "agree", &ipamv1.Pool{Ranges: []string{"198.51.100.160/29"}, Tenants: []string{tenant}})
	for i := range 10 {
		owner := fmt.Sprintf("o%d", i)
		first, err := a.allocs.Allocate(ctxT(t), &ipamv1.AllocateRequest{Parent: "tenants/" + tenant, Allocation: &ipamv1.Allocation{Owner: owner, Ttl: dur(time.Hour)}})
		if err != nil {
			t.Fatal(err)
		}
		again, err := b.allocs.Allocate(ctxT(t), &ipamv1.AllocateRequest{Parent: "tenants/" + tenant, Allocation: &ipamv1.Allocation{Owner: owner, Ttl: dur(time.Hour)}})
		if err != nil {
			t.Fatal(err)
		}
		if again.GetCreated() {
			t.Errorf("%s: created again on the other replica", owner)
		}
		// Lists come from the other replica's index, once it has caught
		// up with the revision etcd had when the listing began.
		listed, err := b.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/" + tenant, PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(listed.GetAllocations()); n != 1 || listed.GetAllocations()[0].GetOwner() != owner {
			t.Errorf("%s: the other replica lists %v, want only it", owner, listed.GetAllocations())
		}
		diff(t, owner+" on the other replica", first.GetAllocation(), again.GetAllocation(), protocmp.Transform())
		renewed, err := b.allocs.RenewAllocation(ctxT(t), &ipamv1.RenewAllocationRequest{Name: first.GetAllocation().GetName(), Etag: first.GetAllocation().GetEtag()})
		if err != nil {
			t.Fatalf("%s: renew on the other replica: %v", owner, err)
		}
		if _, err := a.allocs.Release(ctxT(t), &ipamv1.ReleaseRequest{Name: first.GetAllocation().GetName(), Etag: renewed.GetAllocation().GetEtag(), Hold: dur(0)}); err != nil {
			t.Fatalf("%s: release of the renewal: %v", owner, err)
		}
		_, err = b.allocs.GetAllocation(ctxT(t), &ipamv1.GetAllocationRequest{Name: first.GetAllocation().GetName()})
		wantStatus(t, err, codes.NotFound)
		listed, err = b.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/" + tenant, Filter: `owner = "` + owner + `"`})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(listed.GetAllocations()); n != 0 {
			t.Errorf("%s: released on one replica, still listed by the other", owner)
		}
	}
}

// A filter the index's orders do not answer examines a bounded number of
// allocations per page (here rounds of 3, at most 6): a page may be short,
// even empty, with a token, and the walk still lists every match once, in
// order. Pages without such a filter stay full.
func TestListAllocationsPageExaminesBounded(t *testing.T) {
	n := allocsNode(t, replica.Options{ListRound: 3, ListScanMax: 6})
	mustPool(t, n, "bound", &ipamv1.Pool{Ranges: []string{"198.51.100.224/27"}, Tenants: []string{"bound"}})
	var canaries []string
	for i := range 24 {
		a := &ipamv1.Allocation{Owner: fmt.Sprintf("o%02d", i)}
		if i%8 == 5 {
			a.OwnerLabels = map[string]string{"tier": "canary"}
			canaries = append(canaries, a.Owner)
		}
		mustAllocate(t, n, "bound", a)
	}
	walk := func(filter string, size int32) (owners []string, pageSizes []int) {
		token := ""
		for range 50 {
			resp, err := n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/bound", Filter: filter, PageSize: size, PageToken: token})
			if err != nil {
				t.Fatal(err)
			}
			pageSizes = append(pageSizes, len(resp.GetAllocations()))
			for _, al := range resp.GetAllocations() {
				owners = append(owners, al.GetOwner())
			}
			if token = resp.GetNextPageToken(); token == "" {
				return owners, pageSizes
			}
		}
		t.Fatalf("%q: no last page after 50", filter)
		return nil, nil
	}

	owners, pages := walk(`labels.tier = "canary"`, 2)
	diff(t, "canaries", canaries, owners, sortStrings)
	// 24 allocations, at most 6 examined a page: at least 4 pages for 3
	// matches that 2 full pages would hold.
	if len(pages) < 4 {
		t.Errorf("filtered pages of %v, want at least 4 (6 of 24 examined each)", pages)
	}
	for _, p := range pages {
		if p > 2 {
			t.Errorf("filtered pages of %v, want at most 2 each", pages)
		}
	}

	owners, pages = walk("", 5)
	if len(owners) != 24 {
		t.Errorf("unfiltered walk lists %d, want 24", len(owners))
	}
	diff(t, "unfiltered pages", []int{5, 5, 5, 5, 4}, pages)
}
