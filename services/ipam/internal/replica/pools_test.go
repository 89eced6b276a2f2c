package replica_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

// poolsNode starts a replica on the etcd shared by this file.
func poolsNode(t *testing.T) *node {
	return startNode(t, sharedEtcd(t, "pools").client, replica.Options{})
}

// Listing has exact expectations about every pool, so it gets an etcd of its
// own.
func TestListPools(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	for id, p := range map[string]*ipamv1.Pool{
		"alpha":   {Ranges: []string{"192.0.2.0/28"}, Labels: map[string]string{"env": "prod"}, Tenants: []string{"c1"}},
		"bravo":   {Ranges: []string{"192.0.2.16/28"}, Labels: map[string]string{"env": "dev"}, Tenants: []string{"c2"}},
		"charlie": {Ranges: []string{"192.0.2.32/28"}, Labels: map[string]string{"env": "prod"}, Tenants: []string{"c2", "c3"}},
		"delta":   {Ranges: []string{"2001:db8::/64"}},
	} {
		mustPool(t, n, id, p)
	}

	got := getPool(t, n, "alpha")
	want := &ipamv1.Pool{
		Name:       "pools/alpha",
		Ranges:     []string{"192.0.2.0/28"},
		AutoAssign: boolp(true),
		Tenants:    []string{"c1"},
		Labels:     map[string]string{"env": "prod"},
		Status: &ipamv1.PoolStatus{Families: []*ipamv1.FamilyUsage{
			{Family: fam4, Size: "16", Used: 0, Free: "16"},
		}},
	}
	diff(t, "GetPool", want, got, protocmp.Transform(),
		protocmp.IgnoreFields(&ipamv1.Pool{}, "uid", "etag", "create_time", "update_time"))
	if got.GetUid() == "" || got.GetEtag() == "" || got.GetCreateTime() == nil {
		t.Errorf("output-only fields missing: %v", got)
	}

	for _, tc := range []struct {
		filter string
		want   []string
	}{
		{"", []string{"pools/alpha", "pools/bravo", "pools/charlie", "pools/delta"}},
		{`labels.env = "prod"`, []string{"pools/alpha", "pools/charlie"}},
		{`labels.env:*`, []string{"pools/alpha", "pools/bravo", "pools/charlie"}},
		// delta names no tenants: every tenant may draw from it.
		{`tenant = "c1"`, []string{"pools/alpha", "pools/delta"}},
		{`tenant = "c3"`, []string{"pools/charlie", "pools/delta"}},
		{`labels.env = "prod" AND tenant = "c2"`, []string{"pools/charlie"}},
		{`tenant = "c2" AND tenant = "c3"`, []string{"pools/charlie", "pools/delta"}},
		{`tenant != "c1"`, []string{"pools/bravo", "pools/charlie"}},
		{`tenant = "c2" AND tenant != "c3"`, []string{"pools/bravo"}},
		{`labels.env = "test"`, nil},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			// One page with everything.
			resp, err := n.pools.ListPools(ctxT(t), &ipamv1.ListPoolsRequest{Filter: tc.filter})
			if err != nil {
				t.Fatal(err)
			}
			var all []string
			for _, p := range resp.GetPools() {
				all = append(all, p.GetName())
			}
			diff(t, "one page", tc.want, all)
			if resp.GetNextPageToken() != "" {
				t.Errorf("single page has a next_page_token")
			}
			// Pages of one.
			var paged []string
			token := ""
			for range 10 {
				resp, err := n.pools.ListPools(ctxT(t), &ipamv1.ListPoolsRequest{Filter: tc.filter, PageSize: 1, PageToken: token})
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.GetPools()) > 1 {
					t.Fatalf("page of %d pools, want at most 1", len(resp.GetPools()))
				}
				for _, p := range resp.GetPools() {
					paged = append(paged, p.GetName())
				}
				if token = resp.GetNextPageToken(); token == "" {
					break
				}
			}
			if token != "" {
				t.Fatal("pagination did not end")
			}
			diff(t, "pages of 1", tc.want, paged)
		})
	}
}

func TestCreatePoolRefusesOverlap(t *testing.T) {
	n := poolsNode(t)
	mustPool(t, n, "ov-a", &ipamv1.Pool{Ranges: []string{"192.0.2.0/28", "2001:db8:10::/64"}, Tenants: []string{"ov"}})

	for _, tc := range []struct {
		name   string
		ranges []string
		msg    string
	}{
		{"v4 range", []string{"192.0.2.8-192.0.2.20"}, `192.0.2.8/29 overlaps pool "ov-a"`},
		{"v6 prefix inside", []string{"2001:db8:11::/64", "2001:db8:10:0:1::/80"}, `2001:db8:10:0:1::/80 overlaps pool "ov-a"`},
		{"single address", []string{"192.0.2.15"}, `192.0.2.15 overlaps pool "ov-a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := n.pools.CreatePool(ctxT(t), &ipamv1.CreatePoolRequest{PoolId: "ov-b", Pool: &ipamv1.Pool{Ranges: tc.ranges, Tenants: []string{"ov"}}})
			wantStatus(t, err, codes.FailedPrecondition, tc.msg)
			if got := reason(err); got != "POOL_OVERLAP" {
				t.Errorf("reason %q, want POOL_OVERLAP", got)
			}
			_, err = n.pools.GetPool(ctxT(t), &ipamv1.GetPoolRequest{Name: "pools/ov-b"})
			wantStatus(t, err, codes.NotFound)
		})
	}

	// Ranges of one pool overlapping each other are a bad argument, named by
	// index.
	_, err := n.pools.CreatePool(ctxT(t), &ipamv1.CreatePoolRequest{PoolId: "ov-c", Pool: &ipamv1.Pool{
		Ranges: []string{"192.0.2.96/28", "2001:db8:12::/64", "192.0.2.100-192.0.2.120"}, Tenants: []string{"ov"},
	}})
	wantStatus(t, err, codes.InvalidArgument)
	diff(t, "violations", []string{"pool.ranges[2]"}, violations(err))
	if d := violation(err, "pool.ranges[2]"); d != "overlaps ranges[0]" {
		t.Errorf("description %q, want %q", d, "overlaps ranges[0]")
	}

	// The same pool ID again.
	_, err = n.pools.CreatePool(ctxT(t), &ipamv1.CreatePoolRequest{PoolId: "ov-a", Pool: &ipamv1.Pool{Ranges: []string{"192.0.2.112/29"}, Tenants: []string{"ov"}}})
	wantStatus(t, err, codes.AlreadyExists, `"ov-a"`)

	// An update may not make a pool overlap another either.
	mustPool(t, n, "ov-d", &ipamv1.Pool{Ranges: []string{"2001:db8:13::/64"}, Tenants: []string{"ov"}})
	_, err = n.pools.UpdatePool(ctxT(t), &ipamv1.UpdatePoolRequest{
		Pool:       &ipamv1.Pool{Name: "pools/ov-d", Ranges: []string{"2001:db8:13::/64", "2001:db8:10::/48"}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"ranges"}},
	})
	wantStatus(t, err, codes.FailedPrecondition, `overlaps pool "ov-a"`)
	diff(t, "ranges after refused update", []string{"2001:db8:13::/64"}, getPool(t, n, "ov-d").GetRanges())
}

func TestUpdatePool(t *testing.T) {
	n := poolsNode(t)
	const tenant = "upd"
	created := mustPool(t, n, "upd", &ipamv1.Pool{
		Description: "before",
		Ranges:      []string{"192.0.2.16/29", "192.0.2.24/29"},
		Tenants:     []string{tenant},
		Labels:      map[string]string{"env": "dev"},
	})
	if got := addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "ns/svc-1"}); got[0] != "192.0.2.16" {
		t.Fatalf("first address %v, want 192.0.2.16", got)
	}

	update := func(p *ipamv1.Pool, paths ...string) (*ipamv1.Pool, error) {
		p.Name = "pools/upd"
		resp, err := n.pools.UpdatePool(ctxT(t), &ipamv1.UpdatePoolRequest{Pool: p, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}})
		return resp.GetPool(), err
	}

	// Labels only: the description (not in the mask) stays.
	got, err := update(&ipamv1.Pool{Description: "ignored", Labels: map[string]string{"env": "prod", "team": "net"}}, "labels")
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "labels", map[string]string{"env": "prod", "team": "net"}, got.GetLabels())
	if got.GetDescription() != "before" {
		t.Errorf("description %q changed though not in the mask", got.GetDescription())
	}
	if got.GetEtag() == created.GetEtag() {
		t.Errorf("etag unchanged by an update")
	}
	if got.GetUid() != created.GetUid() || !got.GetCreateTime().AsTime().Equal(created.GetCreateTime().AsTime()) {
		t.Errorf("uid or create_time changed by an update")
	}

	steps := []struct {
		name       string
		pool       *ipamv1.Pool
		paths      []string
		code       codes.Code
		msg        string
		wantRanges []string
		wantSize   string
	}{
		{
			name:       "add a range",
			pool:       &ipamv1.Pool{Ranges: []string{"192.0.2.16/29", "192.0.2.24/29", "192.0.2.32/29"}},
			paths:      []string{"ranges"},
			wantRanges: []string{"192.0.2.16/29", "192.0.2.24/29", "192.0.2.32/29"},
			wantSize:   "24",
		},
		{
			name:       "remove an empty range",
			pool:       &ipamv1.Pool{Ranges: []string{"192.0.2.16/29", "192.0.2.32/29"}},
			paths:      []string{"ranges"},
			wantRanges: []string{"192.0.2.16/29", "192.0.2.32/29"},
			wantSize:   "16",
		},
		{
			name:       "remove the range holding an allocation",
			pool:       &ipamv1.Pool{Ranges: []string{"192.0.2.32/29"}},
			paths:      []string{"ranges"},
			code:       codes.FailedPrecondition,
			msg:        "192.0.2.16",
			wantRanges: []string{"192.0.2.16/29", "192.0.2.32/29"},
			wantSize:   "16",
		},
		{
			name:       "exclude the allocated address",
			pool:       &ipamv1.Pool{Exclusions: []string{"192.0.2.16-192.0.2.17"}},
			paths:      []string{"exclusions"},
			code:       codes.FailedPrecondition,
			msg:        "192.0.2.16",
			wantRanges: []string{"192.0.2.16/29", "192.0.2.32/29"},
			wantSize:   "16",
		},
		{
			name:       "avoid buggy IPs with .16 allocated is fine",
			pool:       &ipamv1.Pool{AvoidBuggyIps: true},
			paths:      []string{"avoid_buggy_ips"},
			wantRanges: []string{"192.0.2.16/29", "192.0.2.32/29"},
			wantSize:   "16",
		},
		{
			name:       "exclude a free address",
			pool:       &ipamv1.Pool{Exclusions: []string{"192.0.2.17"}},
			paths:      []string{"exclusions"},
			wantRanges: []string{"192.0.2.16/29", "192.0.2.32/29"},
			wantSize:   "15",
		},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			_, err := update(st.pool, st.paths...)
			if st.code != codes.OK {
				wantStatus(t, err, st.code, st.msg)
				if got := reason(err); got != "POOL_IN_USE" {
					t.Errorf("reason %q, want POOL_IN_USE", got)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			p := getPool(t, n, "upd")
			diff(t, "ranges", st.wantRanges, p.GetRanges())
			if got := p.GetStatus().GetFamilies()[0].GetSize(); got != st.wantSize {
				t.Errorf("size %s, want %s", got, st.wantSize)
			}
		})
	}
	// The excluded address is skipped; the added range is used.
	diff(t, "next addresses", []string{"192.0.2.18"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "ns/svc-2"}))
	for i := range 5 {
		addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: fmt.Sprintf("ns/fill-%d", i)})
	}
	diff(t, "address from the added range", []string{"192.0.2.32"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "ns/svc-3"}))
}

func TestPoolEtag(t *testing.T) {
	n := poolsNode(t)
	p := mustPool(t, n, "etag", &ipamv1.Pool{Ranges: []string{"192.0.2.40/29"}, Tenants: []string{"etag"}})
	first := p.GetEtag()

	resp, err := n.pools.UpdatePool(ctxT(t), &ipamv1.UpdatePoolRequest{
		Pool:       &ipamv1.Pool{Name: "pools/etag", Etag: first, Description: "one"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}},
	})
	if err != nil {
		t.Fatalf("update with current etag: %v", err)
	}
	second := resp.GetPool().GetEtag()
	if second == first {
		t.Fatalf("etag did not change")
	}

	_, err = n.pools.UpdatePool(ctxT(t), &ipamv1.UpdatePoolRequest{
		Pool:       &ipamv1.Pool{Name: "pools/etag", Etag: first, Description: "two"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}},
	})
	wantStatus(t, err, codes.Aborted)
	if got := reason(err); got != "ETAG_MISMATCH" {
		t.Errorf("reason %q, want ETAG_MISMATCH", got)
	}
	if got := getPool(t, n, "etag").GetDescription(); got != "one" {
		t.Errorf("description %q after refused update, want %q", got, "one")
	}

	_, err = n.pools.DeletePool(ctxT(t), &ipamv1.DeletePoolRequest{Name: "pools/etag", Etag: first})
	wantStatus(t, err, codes.Aborted)
	if _, err := n.pools.DeletePool(ctxT(t), &ipamv1.DeletePoolRequest{Name: "pools/etag", Etag: second}); err != nil {
		t.Fatalf("delete with current etag: %v", err)
	}
	_, err = n.pools.GetPool(ctxT(t), &ipamv1.GetPoolRequest{Name: "pools/etag"})
	wantStatus(t, err, codes.NotFound)
}

func TestDeletePool(t *testing.T) {
	n := poolsNode(t)
	const tenant = "del"
	mustPool(t, n, "del", &ipamv1.Pool{Ranges: []string{"192.0.2.48/28"}, Tenants: []string{tenant}})
	share := func(owner string, port int32) *ipamv1.Allocation {
		return &ipamv1.Allocation{Owner: owner, SharingKey: "k", Ports: []*ipamv1.Port{{Port: port}}}
	}
	diff(t, "s1", []string{"192.0.2.48"}, addrsOf(t, n, tenant, share("ns/s1", 80)))
	diff(t, "s2 shares", []string{"192.0.2.48"}, addrsOf(t, n, tenant, share("ns/s2", 443)))
	diff(t, "s3", []string{"192.0.2.49"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "ns/s3"}))
	diff(t, "kept", []string{"192.0.2.50"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "ns/kept"}))
	mustRelease(t, n, &ipamv1.ReleaseRequest{Parent: "tenants/" + tenant, Owner: "ns/kept", Hold: dur(time.Hour)})

	_, err := n.pools.DeletePool(ctxT(t), &ipamv1.DeletePoolRequest{Name: "pools/del"})
	wantStatus(t, err, codes.FailedPrecondition, `pool "del" has 3 address(es) in use`)
	if got := reason(err); got != "POOL_IN_USE" {
		t.Errorf("reason %q, want POOL_IN_USE", got)
	}
	getPool(t, n, "del")

	resp, err := n.pools.DeletePool(asActor(ctxT(t), "admin@example"), &ipamv1.DeletePoolRequest{Name: "pools/del", Force: true})
	if err != nil {
		t.Fatalf("forced delete: %v", err)
	}
	if got := resp.GetReleasedAllocations(); got != 3 {
		t.Errorf("released_allocations %d, want 3", got)
	}
	_, err = n.pools.GetPool(ctxT(t), &ipamv1.GetPoolRequest{Name: "pools/del"})
	wantStatus(t, err, codes.NotFound)
	list, err := n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/" + tenant})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetAllocations()) != 0 {
		t.Errorf("allocations left after forced delete: %v", list.GetAllocations())
	}
	audit, err := n.audit.ListAuditRecords(ctxT(t), &ipamv1.ListAuditRecordsRequest{Parent: "tenants/" + tenant, Filter: `actor = "admin@example"`})
	if err != nil {
		t.Fatal(err)
	}
	var released []string
	for _, r := range audit.GetAuditRecords() {
		if r.GetAction() == ipamv1.AuditRecord_ACTION_RELEASE {
			released = append(released, r.GetOwner())
		}
	}
	diff(t, "owners released by the forced delete", []string{"ns/s1", "ns/s2", "ns/s3"}, released, sortStrings)

	// Nothing of the old pool is left: the same range again is empty, and
	// the owner whose addresses were kept gets no hold back.
	p := mustPool(t, n, "del", &ipamv1.Pool{Ranges: []string{"192.0.2.48/28"}, Tenants: []string{tenant}})
	diff(t, "usage of the new pool", []string{"IP_FAMILY_IPV4 size=16 used=0 free=16"}, usage(p))
	diff(t, "another owner", []string{"192.0.2.48"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "ns/other"}))
	diff(t, "the owner whose addresses were kept", []string{"192.0.2.49"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "ns/kept"}))
}

func TestPoolStatus(t *testing.T) {
	n := poolsNode(t)
	const tenant = "status"
	big := mustPool(t, n, "status-big", &ipamv1.Pool{Ranges: []string{"2001:db8:11::/64"}, Tenants: []string{tenant}, AutoAssign: boolp(false)})
	diff(t, "/64", []string{"IP_FAMILY_IPV6 size=18446744073709551616 used=0 free=18446744073709551616"}, usage(big))
	dual := mustPool(t, n, "status-dual", &ipamv1.Pool{Ranges: []string{"192.0.2.64/29", "2001:db8:12::/120"}, Tenants: []string{tenant}, AutoAssign: boolp(false)})
	diff(t, "dual-stack", []string{
		"IP_FAMILY_IPV4 size=8 used=0 free=8",
		"IP_FAMILY_IPV6 size=256 used=0 free=256",
	}, usage(dual))

	mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "big-1", RequestedPool: "pools/status-big"})
	diff(t, "/64 after one", []string{"IP_FAMILY_IPV6 size=18446744073709551616 used=1 free=18446744073709551615"}, usage(getPool(t, n, "status-big")))

	mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "dual-1", RequestedPool: "pools/status-dual", IpFamilyPolicy: requireDual})
	mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "dual-2", RequestedPool: "pools/status-dual", IpFamilies: []ipamv1.IPFamily{fam4}})
	// Shared addresses count once.
	mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "dual-3", RequestedPool: "pools/status-dual", IpFamilies: []ipamv1.IPFamily{fam6}, SharingKey: "k", Ports: []*ipamv1.Port{{Port: 80}}})
	mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "dual-4", RequestedPool: "pools/status-dual", IpFamilies: []ipamv1.IPFamily{fam6}, SharingKey: "k", Ports: []*ipamv1.Port{{Port: 443}}})
	want := []string{
		"IP_FAMILY_IPV4 size=8 used=2 free=6",
		"IP_FAMILY_IPV6 size=256 used=2 free=254",
	}
	diff(t, "dual-stack after allocations", want, usage(getPool(t, n, "status-dual")))

	// Addresses kept for a released owner are used; freed ones are not.
	mustRelease(t, n, &ipamv1.ReleaseRequest{Parent: "tenants/" + tenant, Owner: "dual-1", Hold: dur(time.Hour)})
	diff(t, "after release with hold", want, usage(getPool(t, n, "status-dual")))
	releaseOwner(t, n, tenant, "dual-2")
	diff(t, "after release", []string{
		"IP_FAMILY_IPV4 size=8 used=1 free=7",
		"IP_FAMILY_IPV6 size=256 used=2 free=254",
	}, usage(getPool(t, n, "status-dual")))
}

func TestAvoidBuggyIPs(t *testing.T) {
	n := poolsNode(t)
	const tenant = "buggy"
	p := mustPool(t, n, "buggy", &ipamv1.Pool{
		Ranges:        []string{"203.0.113.0-203.0.113.1", "203.0.113.254-203.0.113.255"},
		AvoidBuggyIps: true,
		Tenants:       []string{tenant},
	})
	diff(t, "usage", []string{"IP_FAMILY_IPV4 size=2 used=0 free=2"}, usage(p))
	diff(t, "first", []string{"203.0.113.1"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "b1"}))
	diff(t, "second", []string{"203.0.113.254"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "b2"}))
	_, err := allocate(ctxT(t), n, tenant, &ipamv1.Allocation{Owner: "b3"})
	wantStatus(t, err, codes.ResourceExhausted)
	for _, addr := range []string{"203.0.113.0", "203.0.113.255"} {
		_, err := allocate(ctxT(t), n, tenant, &ipamv1.Allocation{Owner: "b4", RequestedAddresses: []string{addr}})
		wantStatus(t, err, codes.FailedPrecondition, addr)
	}
}

func TestExclusionsNeverHandedOut(t *testing.T) {
	n := poolsNode(t)
	const tenant = "excl"
	p := mustPool(t, n, "excl", &ipamv1.Pool{
		Ranges:     []string{"192.0.2.72/29"},
		Exclusions: []string{"192.0.2.72-192.0.2.74", "192.0.2.76"},
		Tenants:    []string{tenant},
	})
	diff(t, "usage", []string{"IP_FAMILY_IPV4 size=4 used=0 free=4"}, usage(p))
	var got []string
	for _, o := range []string{"e1", "e2", "e3", "e4"} {
		got = append(got, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: o})...)
	}
	diff(t, "addresses", []string{"192.0.2.75", "192.0.2.77", "192.0.2.78", "192.0.2.79"}, got)
	_, err := allocate(ctxT(t), n, tenant, &ipamv1.Allocation{Owner: "e5"})
	wantStatus(t, err, codes.ResourceExhausted)
	_, err = allocate(ctxT(t), n, tenant, &ipamv1.Allocation{Owner: "e5", RequestedAddresses: []string{"192.0.2.76"}})
	wantStatus(t, err, codes.FailedPrecondition, "192.0.2.76")
}

func TestAutoAssignOff(t *testing.T) {
	n := poolsNode(t)
	const tenant = "auto"
	manual := mustPool(t, n, "auto-manual", &ipamv1.Pool{Ranges: []string{"192.0.2.80/29"}, AutoAssign: boolp(false), Tenants: []string{tenant}})
	if manual.AutoAssign == nil || manual.GetAutoAssign() {
		t.Errorf("auto_assign %v, want false", manual.AutoAssign)
	}
	mustPool(t, n, "auto-on", &ipamv1.Pool{Ranges: []string{"192.0.2.88/30"}, Tenants: []string{tenant}})

	for i, want := range []string{"192.0.2.88", "192.0.2.89", "192.0.2.90", "192.0.2.91"} {
		al := mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: fmt.Sprintf("auto-%d", i)})
		diff(t, "auto-assigned", []string{want}, al.GetAddresses())
		if al.GetPool() != "pools/auto-on" {
			t.Errorf("pool %s, want pools/auto-on", al.GetPool())
		}
	}
	// The auto-assign pool is full; the manual one is not used unasked.
	_, err := allocate(ctxT(t), n, tenant, &ipamv1.Allocation{Owner: "auto-x"})
	wantStatus(t, err, codes.ResourceExhausted)
	// Asked for by name or by address, it is.
	diff(t, "by name", []string{"192.0.2.80"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "auto-x", RequestedPool: "pools/auto-manual"}))
	diff(t, "by address", []string{"192.0.2.85"}, addrsOf(t, n, tenant, &ipamv1.Allocation{Owner: "auto-y", RequestedAddresses: []string{"192.0.2.85"}}))
}

func TestPoolRequestID(t *testing.T) {
	n := poolsNode(t)
	const tenant = "poolreq"
	create := &ipamv1.CreatePoolRequest{PoolId: "poolreq", RequestId: "create-1", Pool: &ipamv1.Pool{Ranges: []string{"192.0.2.96/29"}, Tenants: []string{tenant}}}
	first, err := n.pools.CreatePool(ctxT(t), create)
	if err != nil {
		t.Fatal(err)
	}
	again, err := n.pools.CreatePool(ctxT(t), create)
	if err != nil {
		t.Fatalf("retried create: %v", err)
	}
	diff(t, "retried create", first.GetPool(), again.GetPool(), protocmp.Transform())
	_, err = n.pools.CreatePool(ctxT(t), &ipamv1.CreatePoolRequest{PoolId: "poolreq-2", RequestId: "create-1", Pool: &ipamv1.Pool{Ranges: []string{"192.0.2.104/29"}, Tenants: []string{tenant}}})
	wantStatus(t, err, codes.InvalidArgument, "create-1")

	mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "a"})
	mustAllocate(t, n, tenant, &ipamv1.Allocation{Owner: "b"})
	del := &ipamv1.DeletePoolRequest{Name: "pools/poolreq", Force: true, RequestId: "delete-1"}
	r1, err := n.pools.DeletePool(ctxT(t), del)
	if err != nil {
		t.Fatal(err)
	}
	if r1.GetReleasedAllocations() != 2 {
		t.Fatalf("released_allocations %d, want 2", r1.GetReleasedAllocations())
	}
	r2, err := n.pools.DeletePool(ctxT(t), del)
	if err != nil {
		t.Fatalf("retried delete: %v", err)
	}
	diff(t, "retried delete", r1, r2, protocmp.Transform())
}

func TestPoolValidateOnly(t *testing.T) {
	n := poolsNode(t)
	resp, err := n.pools.CreatePool(ctxT(t), &ipamv1.CreatePoolRequest{PoolId: "vo", ValidateOnly: true, Pool: &ipamv1.Pool{Ranges: []string{"192.0.2.112/29"}, Tenants: []string{"vo"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetPool().GetName() != "pools/vo" {
		t.Errorf("validated pool %v", resp.GetPool())
	}
	_, err = n.pools.GetPool(ctxT(t), &ipamv1.GetPoolRequest{Name: "pools/vo"})
	wantStatus(t, err, codes.NotFound)

	p := mustPool(t, n, "vo", &ipamv1.Pool{Ranges: []string{"192.0.2.112/29"}, Tenants: []string{"vo"}})
	// Validation refuses what a real create would.
	_, err = n.pools.CreatePool(ctxT(t), &ipamv1.CreatePoolRequest{PoolId: "vo-2", ValidateOnly: true, Pool: &ipamv1.Pool{Ranges: []string{"192.0.2.116/30"}, Tenants: []string{"vo"}}})
	wantStatus(t, err, codes.FailedPrecondition, `overlaps pool "vo"`)
	_, err = n.pools.CreatePool(ctxT(t), &ipamv1.CreatePoolRequest{PoolId: "vo", ValidateOnly: true, Pool: &ipamv1.Pool{Ranges: []string{"192.0.2.120/29"}, Tenants: []string{"vo"}}})
	wantStatus(t, err, codes.AlreadyExists)
	_, err = n.pools.UpdatePool(ctxT(t), &ipamv1.UpdatePoolRequest{
		Pool: &ipamv1.Pool{Name: "pools/vo", Labels: map[string]string{"env": "prod"}}, ValidateOnly: true,
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"labels"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "pool after a validate-only update", p, getPool(t, n, "vo"), protocmp.Transform())
}
