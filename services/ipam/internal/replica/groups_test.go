package replica_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

// groupsNode starts a replica on the etcd shared by this file.
func groupsNode(t *testing.T) *node {
	return startNode(t, sharedEtcd(t, "groups").client, replica.Options{})
}

func mustGroup(t *testing.T, n *node, pool, id string, tenants ...string) *ipamv1.GlobalGroup {
	t.Helper()
	var names []string
	for _, tn := range tenants {
		names = append(names, "tenants/"+tn)
	}
	resp, err := n.groups.CreateGlobalGroup(ctxT(t), &ipamv1.CreateGlobalGroupRequest{
		Parent: "pools/" + pool, GlobalGroupId: id, GlobalGroup: &ipamv1.GlobalGroup{Tenants: names},
	})
	if err != nil {
		t.Fatalf("create group %s: %v", id, err)
	}
	return resp.GetGlobalGroup()
}

func getGroup(t *testing.T, n *node, name string) *ipamv1.GlobalGroup {
	t.Helper()
	resp, err := n.groups.GetGlobalGroup(ctxT(t), &ipamv1.GetGlobalGroupRequest{Name: name})
	if err != nil {
		t.Fatalf("get group %s: %v", name, err)
	}
	return resp.GetGlobalGroup()
}

func members(g *ipamv1.GlobalGroup) []string {
	var out []string
	for _, m := range g.GetMembers() {
		out = append(out, m.GetAllocation()+" "+m.GetRole().String())
	}
	return out
}

// TestGlobalGroupSharesOneAddressAcrossTenants: members of different
// tenants get the same addresses (dual-stack), through either replica; the
// addresses stay while a member remains and are freed with the last one.
func TestGlobalGroupSharesOneAddressAcrossTenants(t *testing.T) {
	n := groupsNode(t)
	other := groupsNode(t)
	mustPool(t, n, "anycast", &ipamv1.Pool{Ranges: []string{"198.51.100.64/29", "2001:db8:64::/125"}})
	g := mustGroup(t, n, "anycast", "web", "east", "west", "north")
	diff(t, "name", "pools/anycast/globalGroups/web", g.GetName())

	join := func(n *node, tenant string, role ipamv1.GlobalRole) *ipamv1.Allocation {
		return mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "shop/web", IpFamilyPolicy: requireDual, GlobalGroup: g.GetName(), GlobalRole: role})
	}
	east := join(n, "east", 0)
	west := join(other, "west", ipamv1.GlobalRole_GLOBAL_ROLE_BACKUP)
	want := []string{"198.51.100.64", "2001:db8:64::"}
	diff(t, "east", want, east.GetAddresses())
	diff(t, "west", want, west.GetAddresses())
	diff(t, "west group", g.GetName(), west.GetGlobalGroup())
	diff(t, "west role", ipamv1.GlobalRole_GLOBAL_ROLE_BACKUP, west.GetGlobalRole())
	// Joining again is idempotent.
	again, err := n.allocs.Allocate(ctxT(t), &ipamv1.AllocateRequest{Parent: "tenants/east", Allocation: &ipamv1.Allocation{Owner: "shop/web", IpFamilyPolicy: requireDual, GlobalGroup: g.GetName()}})
	if err != nil || again.GetCreated() {
		t.Fatalf("join again: created %v, %v", again.GetCreated(), err)
	}
	// An ordinary allocation of the same pool gets another address.
	diff(t, "ordinary", []string{"198.51.100.65"}, addrsOf(t, n, "east", &ipamv1.Allocation{Owner: "shop/db", RequestedPool: "pools/anycast"}))

	got := getGroup(t, other, g.GetName())
	diff(t, "group addresses", want, got.GetAddresses())
	diff(t, "members", []string{
		"tenants/east/allocations/" + allocationID("shop/web") + " GLOBAL_ROLE_ACTIVE",
		"tenants/west/allocations/" + allocationID("shop/web") + " GLOBAL_ROLE_BACKUP",
	}, members(got))

	// ListAllocations filters by group, across tenants.
	list, err := n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/-", Filter: fmt.Sprintf("global_group = %q", g.GetName())})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range list.GetAllocations() {
		names = append(names, a.GetName())
	}
	diff(t, "members listed", []string{"tenants/east/allocations/" + allocationID("shop/web"), "tenants/west/allocations/" + allocationID("shop/web")}, names)

	// The group cannot be deleted while it has members.
	_, err = n.groups.DeleteGlobalGroup(ctxT(t), &ipamv1.DeleteGlobalGroupRequest{Name: g.GetName()})
	wantStatus(t, err, codes.FailedPrecondition, "member")

	// A release with a hold keeps nothing: the other member keeps the address.
	rel := mustRelease(t, n, &ipamv1.ReleaseRequest{Parent: "tenants/east", Owner: "shop/web", Hold: dur(3600e9)})
	if rel.GetHoldExpireTime() != nil {
		t.Errorf("a global address was held: %v", rel.GetHoldExpireTime())
	}
	diff(t, "after east left", want, getGroup(t, n, g.GetName()).GetAddresses())
	diff(t, "north joins", want, join(other, "north", 0).GetAddresses())
	releaseOwner(t, other, "west", "shop/web")
	releaseOwner(t, n, "north", "shop/web")
	eventually(t, 10e9, "group empty", func() bool { return len(getGroup(t, other, g.GetName()).GetAddresses()) == 0 })
	// Freed: the next ordinary allocation takes the lowest, the group's old one.
	diff(t, "freed", []string{"198.51.100.64"}, addrsOf(t, n, "east", &ipamv1.Allocation{Owner: "shop/cache", RequestedPool: "pools/anycast"}))
	// Each tenant's audit log has its member's join and leave, with the
	// shared address.
	for _, tn := range []string{"east", "west", "north"} {
		resp, err := n.audit.ListAuditRecords(ctxT(t), &ipamv1.ListAuditRecordsRequest{Parent: "tenants/" + tn, Filter: `owner = "shop/web"`})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range resp.GetAuditRecords() {
			got = append(got, r.GetAction().String()+" "+strings.Join(r.GetAddresses(), ","))
		}
		diff(t, tn+" audit", []string{"ACTION_RELEASE " + strings.Join(want, ","), "ACTION_ALLOCATE " + strings.Join(want, ",")}, got)
	}
	if _, err := other.groups.DeleteGlobalGroup(ctxT(t), &ipamv1.DeleteGlobalGroupRequest{Name: g.GetName()}); err != nil {
		t.Fatalf("delete empty group: %v", err)
	}
	_, err = n.allocs.Allocate(ctxT(t), &ipamv1.AllocateRequest{Parent: "tenants/east", Allocation: &ipamv1.Allocation{Owner: "shop/new", GlobalGroup: g.GetName()}})
	wantStatus(t, err, codes.NotFound, "not found")
}

// TestGlobalGroupRefusals: each refusal names its reason.
func TestGlobalGroupRefusals(t *testing.T) {
	n := groupsNode(t)
	mustPool(t, n, "gr", &ipamv1.Pool{Ranges: []string{"198.51.100.80/29"}, Tenants: []string{"a", "b", "c"}})
	mustPool(t, n, "gr-lan", &ipamv1.Pool{Ranges: []string{"198.51.100.88/29"}})
	g := mustGroup(t, n, "gr", "api", "a", "b", "outsider")
	lan := mustGroup(t, n, "gr-lan", "api", "c")
	if _, err := n.ann.CreateL2Advertisement(ctxT(t), &ipamv1.CreateL2AdvertisementRequest{
		Parent: "tenants/c", L2AdvertisementId: "lan", L2Advertisement: &ipamv1.L2Advertisement{Pools: []string{"pools/gr-lan"}},
	}); err != nil {
		t.Fatal(err)
	}
	mustAllocate(t, n, "a", &ipamv1.Allocation{Owner: "x/api", GlobalGroup: g.GetName()})
	for _, tc := range []struct {
		name, tenant string
		a            *ipamv1.Allocation
		code         codes.Code
		part         string
	}{
		{"no grant", "c", &ipamv1.Allocation{Owner: "x/api", GlobalGroup: g.GetName()}, codes.FailedPrecondition, `tenant "c" is not granted`},
		{"pool does not serve the tenant", "outsider", &ipamv1.Allocation{Owner: "x/api", GlobalGroup: g.GetName()}, codes.FailedPrecondition, `may not draw from pool "gr"`},
		{"second member of a tenant", "a", &ipamv1.Allocation{Owner: "x/api2", GlobalGroup: g.GetName()}, codes.FailedPrecondition, "one per tenant"},
		{"L2 advertised", "c", &ipamv1.Allocation{Owner: "x/api", GlobalGroup: lan.GetName()}, codes.FailedPrecondition, "L2 is per segment"},
		{"another pool requested", "b", &ipamv1.Allocation{Owner: "x/api", GlobalGroup: g.GetName(), RequestedPool: "pools/gr-lan"}, codes.FailedPrecondition, "draws from pool"},
		{"no such group", "b", &ipamv1.Allocation{Owner: "x/api", GlobalGroup: "pools/gr/globalGroups/nope"}, codes.NotFound, "not found"},
		{"with a sharing key", "b", &ipamv1.Allocation{Owner: "x/api", GlobalGroup: g.GetName(), SharingKey: "k"}, codes.InvalidArgument, "sharing_key"},
		{"with an address", "b", &ipamv1.Allocation{Owner: "x/api", GlobalGroup: g.GetName(), RequestedAddresses: []string{"198.51.100.81"}}, codes.InvalidArgument, "requested_addresses"},
		{"bad name", "b", &ipamv1.Allocation{Owner: "x/api", GlobalGroup: "web"}, codes.InvalidArgument, "global_group"},
		{"owner holds a plain allocation", "a", &ipamv1.Allocation{Owner: "x/api"}, codes.FailedPrecondition, "release it first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := allocate(ctxT(t), n, tc.tenant, tc.a)
			wantStatus(t, err, tc.code, tc.part)
		})
	}
	// Grants can change: b loses its grant, c gets one (on the pool that
	// serves it and has no L2 advertisement of c).
	if _, err := n.groups.UpdateGlobalGroup(ctxT(t), &ipamv1.UpdateGlobalGroupRequest{
		GlobalGroup: &ipamv1.GlobalGroup{Name: g.GetName(), Tenants: []string{"tenants/a", "tenants/c"}},
		UpdateMask:  &fieldmaskpb.FieldMask{Paths: []string{"tenants"}},
	}); err != nil {
		t.Fatal(err)
	}
	_, err := allocate(ctxT(t), n, "b", &ipamv1.Allocation{Owner: "x/api", GlobalGroup: g.GetName()})
	wantStatus(t, err, codes.FailedPrecondition, "not granted")
	diff(t, "c joins", []string{"198.51.100.80"}, addrsOf(t, n, "c", &ipamv1.Allocation{Owner: "x/api", GlobalGroup: g.GetName()}))
	// An L2 advertisement made after a member joined does not refuse the
	// member's retries (the planner keeps it off L2).
	if _, err := n.ann.CreateL2Advertisement(ctxT(t), &ipamv1.CreateL2AdvertisementRequest{
		Parent: "tenants/a", L2AdvertisementId: "late", L2Advertisement: &ipamv1.L2Advertisement{Pools: []string{"pools/gr"}},
	}); err != nil {
		t.Fatal(err)
	}
	again, err := n.allocs.Allocate(ctxT(t), &ipamv1.AllocateRequest{Parent: "tenants/a", Allocation: &ipamv1.Allocation{Owner: "x/api", GlobalGroup: g.GetName()}})
	if err != nil || again.GetCreated() {
		t.Fatalf("member's retry after a late L2 advertisement: created %v, %v", again.GetCreated(), err)
	}
}

// TestGlobalGroupConcurrentFirstJoins: tenants joining an empty group at
// once through two replicas all get one address: the group's guard makes
// the replicas that lose the race plan again and share the winner's.
func TestGlobalGroupConcurrentFirstJoins(t *testing.T) {
	a, b := groupsNode(t), groupsNode(t)
	mustPool(t, a, "race", &ipamv1.Pool{Ranges: []string{"198.51.100.96/28"}})
	var tenants []string
	for i := range 8 {
		tenants = append(tenants, fmt.Sprintf("c%d", i))
	}
	for round := range 3 {
		g := mustGroup(t, a, "race", fmt.Sprintf("g%d", round), tenants...)
		got := make([][]string, len(tenants))
		var wg sync.WaitGroup
		for i, tn := range tenants {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := a
				if i%2 == 1 {
					n = b
				}
				al, err := allocate(ctxT(t), n, tn, &ipamv1.Allocation{Owner: fmt.Sprintf("svc%d", round), GlobalGroup: g.GetName()})
				if err != nil {
					t.Errorf("%s: %v", tn, err)
					return
				}
				got[i] = al.GetAddresses()
			}()
		}
		wg.Wait()
		for i := range got {
			diff(t, fmt.Sprintf("round %d tenant %s", round, tenants[i]), got[0], got[i])
		}
		diff(t, "group members", len(tenants), len(getGroup(t, b, g.GetName()).GetMembers()))
	}
}

// TestGlobalGroupDeleteRacesFirstJoin: a delete and a first join of an empty
// group at once, through two replicas, never both succeed: a member of a
// deleted group would hold an address no group accounts for.
func TestGlobalGroupDeleteRacesFirstJoin(t *testing.T) {
	a, b := groupsNode(t), groupsNode(t)
	mustPool(t, a, "del-race", &ipamv1.Pool{Ranges: []string{"198.51.100.112/29"}})
	for round := range 10 {
		g := mustGroup(t, a, "del-race", fmt.Sprintf("g%d", round), "t1")
		var joinErr, delErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, joinErr = allocate(ctxT(t), b, "t1", &ipamv1.Allocation{Owner: fmt.Sprintf("svc%d", round), GlobalGroup: g.GetName()})
		}()
		go func() {
			defer wg.Done()
			_, delErr = a.groups.DeleteGlobalGroup(ctxT(t), &ipamv1.DeleteGlobalGroupRequest{Name: g.GetName()})
		}()
		wg.Wait()
		switch {
		case joinErr == nil && delErr == nil:
			t.Fatalf("round %d: the join and the delete both succeeded", round)
		case joinErr == nil:
			wantCode(t, delErr, codes.FailedPrecondition)
			releaseOwner(t, a, "t1", fmt.Sprintf("svc%d", round))
		case delErr == nil:
			wantCode(t, joinErr, codes.NotFound)
		default:
			t.Fatalf("round %d: both failed: join %v, delete %v", round, joinErr, delErr)
		}
	}
	// Whatever won, no address is left claimed: the pool is empty again.
	diff(t, "free again", []string{"198.51.100.112"}, addrsOf(t, a, "t1", &ipamv1.Allocation{Owner: "after", RequestedPool: "pools/del-race"}))
}
