package replica_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

// Every bad request is InvalidArgument with a google.rpc.BadRequest naming
// exactly the bad fields, and changes nothing.
func TestValidation(t *testing.T) {
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	valid := mustPool(t, n, "valid", &ipamv1.Pool{Ranges: []string{"192.0.2.0/28"}, Tenants: []string{"c1"}})
	okAlloc := func() *ipamv1.Allocation { return &ipamv1.Allocation{Owner: "ns/svc"} }
	withAlloc := func(f func(a *ipamv1.Allocation)) *ipamv1.Allocation { a := okAlloc(); f(a); return a }
	pool := func(f func(p *ipamv1.Pool)) *ipamv1.Pool {
		p := &ipamv1.Pool{Ranges: []string{"198.51.100.0/28"}}
		f(p)
		return p
	}
	createPool := func(id string, p *ipamv1.Pool) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := n.pools.CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: id, Pool: p})
			return err
		}
	}
	updatePool := func(p *ipamv1.Pool, paths ...string) func(context.Context) error {
		return func(ctx context.Context) error {
			req := &ipamv1.UpdatePoolRequest{Pool: p}
			if paths != nil {
				req.UpdateMask = &fieldmaskpb.FieldMask{Paths: paths}
			}
			_, err := n.pools.UpdatePool(ctx, req)
			return err
		}
	}
	alloc := func(parent string, a *ipamv1.Allocation) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := n.allocs.Allocate(ctx, &ipamv1.AllocateRequest{Parent: parent, Allocation: a})
			return err
		}
	}
	release := func(req *ipamv1.ReleaseRequest) func(context.Context) error {
		return func(ctx context.Context) error { _, err := n.allocs.Release(ctx, req); return err }
	}
	listPools := func(req *ipamv1.ListPoolsRequest) func(context.Context) error {
		return func(ctx context.Context) error { _, err := n.pools.ListPools(ctx, req); return err }
	}
	listAllocs := func(req *ipamv1.ListAllocationsRequest) func(context.Context) error {
		return func(ctx context.Context) error { _, err := n.allocs.ListAllocations(ctx, req); return err }
	}
	watchAllocs := func(req *ipamv1.WatchAllocationsRequest) func(context.Context) error {
		return func(ctx context.Context) error {
			s, err := n.allocs.WatchAllocations(ctx, req)
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}
	}
	mustPool(t, n, "valid-2", &ipamv1.Pool{Ranges: []string{"192.0.2.16/28"}, Tenants: []string{"c1"}})
	// A page token of the unfiltered pool listing, to reuse elsewhere.
	resp, err := n.pools.ListPools(ctxT(t), &ipamv1.ListPoolsRequest{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	otherToken := resp.GetNextPageToken()
	if otherToken == "" {
		t.Fatal("no next_page_token with two pools and page_size 1")
	}
	validName := nameOf("c1", "ns/svc")
	longOwner := strings.Repeat("o", 254)

	for _, tc := range []struct {
		name string
		call func(context.Context) error
		want []string
		// in, if set, must be in the description of the first violation.
		in string
	}{
		// CreatePool.
		{"create: no pool_id", createPool("", pool(func(*ipamv1.Pool) {})), []string{"pool_id"}, ""},
		{"create: bad pool_id", createPool("Bad_ID", pool(func(*ipamv1.Pool) {})), []string{"pool_id"}, ""},
		{"create: pool_id starting with a digit", createPool("1pool", pool(func(*ipamv1.Pool) {})), []string{"pool_id"}, ""},
		{"create: pool_id too long", createPool("p"+strings.Repeat("x", 63), pool(func(*ipamv1.Pool) {})), []string{"pool_id"}, ""},
		{"create: no pool", createPool("p", nil), []string{"pool"}, ""},
		{"create: no ranges", createPool("p", &ipamv1.Pool{}), []string{"pool.ranges"}, ""},
		{"create: CIDR with host bits", createPool("p", pool(func(p *ipamv1.Pool) { p.Ranges = []string{"192.0.2.1/24"} })), []string{"pool.ranges[0]"}, "192.0.2.0/24"},
		{"create: v6 CIDR with host bits", createPool("p", pool(func(p *ipamv1.Pool) { p.Ranges = []string{"198.51.100.0/28", "2001:db8::1/64"} })), []string{"pool.ranges[1]"}, "2001:db8::/64"},
		{"create: not a range", createPool("p", pool(func(p *ipamv1.Pool) { p.Ranges = []string{"198.51.100.0/28", "nonsense"} })), []string{"pool.ranges[1]"}, ""},
		{"create: reversed range", createPool("p", pool(func(p *ipamv1.Pool) { p.Ranges = []string{"198.51.100.9-198.51.100.2"} })), []string{"pool.ranges[0]"}, ""},
		{"create: ranges overlap", createPool("p", pool(func(p *ipamv1.Pool) { p.Ranges = []string{"198.51.100.0/28", "198.51.100.8"} })), []string{"pool.ranges[1]"}, "ranges[0]"},
		{"create: loopback", createPool("p", pool(func(p *ipamv1.Pool) { p.Ranges = []string{"198.51.100.0/28", "127.0.0.0/30"} })), []string{"pool.ranges[1]"}, "loopback"},
		{"create: this network", createPool("p", pool(func(p *ipamv1.Pool) { p.Ranges = []string{"0.0.0.0-0.0.0.3"} })), []string{"pool.ranges[0]"}, "0.0.0.0/8"},
		{"create: everything", createPool("p", pool(func(p *ipamv1.Pool) { p.Ranges = []string{"0.0.0.0/0"}; p.AvoidBuggyIps = true })), []string{"pool.ranges[0]", "pool.avoid_buggy_ips"}, "0.0.0.0/8"},
		{"create: link-local", createPool("p", pool(func(p *ipamv1.Pool) { p.Ranges = []string{"169.254.0.0/28"} })), []string{"pool.ranges[0]"}, "link-local"},
		{"create: multicast", createPool("p", pool(func(p *ipamv1.Pool) { p.Ranges = []string{"239.0.0.0/28"} })), []string{"pool.ranges[0]"}, "multicast"},
		{"create: broadcast", createPool("p", pool(func(p *ipamv1.Pool) { p.Ranges = []string{"255.255.255.255"} })), []string{"pool.ranges[0]"}, "broadcast"},
		{"create: v6 loopback", createPool("p", pool(func(p *ipamv1.Pool) { p.Ranges = []string{"::1"} })), []string{"pool.ranges[0]"}, "loopback"},
		{"create: v6 link-local", createPool("p", pool(func(p *ipamv1.Pool) { p.Ranges = []string{"fe80::/120"} })), []string{"pool.ranges[0]"}, "link-local"},
		{"create: v6 multicast", createPool("p", pool(func(p *ipamv1.Pool) { p.Ranges = []string{"ff05::/120"} })), []string{"pool.ranges[0]"}, "multicast"},
		{"create: v4-mapped", createPool("p", pool(func(p *ipamv1.Pool) { p.Ranges = []string{"::fffe:ffff:ffff-::1:0:0:0"} })), []string{"pool.ranges[0]"}, "IPv4-mapped"},
		{"create: avoid_buggy_ips over more than a /8", createPool("p", pool(func(p *ipamv1.Pool) {
			p.Ranges = []string{"10.0.0.0-11.0.0.255"}
			p.AvoidBuggyIps = true
		})), []string{"pool.avoid_buggy_ips"}, "65536"},
		{"create: bad exclusion", createPool("p", pool(func(p *ipamv1.Pool) { p.Exclusions = []string{"198.51.100.1", "198.51.100.300"} })), []string{"pool.exclusions[1]"}, ""},
		{"create: bad tenant", createPool("p", pool(func(p *ipamv1.Pool) { p.Tenants = []string{"c1", "Bad Tenant"} })), []string{"pool.tenants[1]"}, ""},
		{"create: tenant starting with upper case", createPool("p", pool(func(p *ipamv1.Pool) { p.Tenants = []string{"C1"} })), []string{"pool.tenants[0]"}, ""},
		{"create: repeated tenant", createPool("p", pool(func(p *ipamv1.Pool) { p.Tenants = []string{"c1", "c1"} })), []string{"pool.tenants[1]"}, ""},
		{"create: bad label", createPool("p", pool(func(p *ipamv1.Pool) { p.Labels = map[string]string{"env": "prod!"} })), []string{"pool.labels[env]"}, ""},
		{"create: negative priority", createPool("p", pool(func(p *ipamv1.Pool) { p.AllocationPolicy = &ipamv1.AllocationPolicy{Priority: -1} })), []string{"pool.allocation_policy.priority"}, ""},
		{"create: bad namespace", createPool("p", pool(func(p *ipamv1.Pool) {
			p.AllocationPolicy = &ipamv1.AllocationPolicy{Namespaces: []string{"web", "Web_2"}}
		})), []string{"pool.allocation_policy.namespaces[1]"}, ""},
		{"create: selector without operator", createPool("p", pool(func(p *ipamv1.Pool) {
			p.AllocationPolicy = &ipamv1.AllocationPolicy{OwnerSelectors: []*ipamv1.LabelSelector{
				{MatchLabels: map[string]string{"app": "web"}},
				{MatchExpressions: []*ipamv1.LabelSelectorRequirement{{Key: "tier"}}},
			}}
		})), []string{"pool.allocation_policy.owner_selectors[1].match_expressions[0].operator"}, ""},
		{"create: IN without values", createPool("p", pool(func(p *ipamv1.Pool) {
			p.AllocationPolicy = &ipamv1.AllocationPolicy{NamespaceSelectors: []*ipamv1.LabelSelector{
				{MatchExpressions: []*ipamv1.LabelSelectorRequirement{{Key: "team", Operator: ipamv1.LabelSelectorRequirement_OPERATOR_IN}}},
			}}
		})), []string{"pool.allocation_policy.namespace_selectors[0].match_expressions[0].values"}, ""},
		{"create: long description", createPool("p", pool(func(p *ipamv1.Pool) { p.Description = strings.Repeat("d", 1025) })), []string{"pool.description"}, ""},
		{"create: bad request_id", func(ctx context.Context) error {
			_, err := n.pools.CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: "p", Pool: pool(func(*ipamv1.Pool) {}), RequestId: "no spaces"})
			return err
		}, []string{"request_id"}, ""},
		{"create: every bad field at once", createPool("P", &ipamv1.Pool{Ranges: []string{"192.0.2.1/24"}, Tenants: []string{"-"}}), []string{"pool_id", "pool.ranges[0]", "pool.tenants[0]"}, ""},

		// GetPool.
		{"get pool: empty name", func(ctx context.Context) error {
			_, err := n.pools.GetPool(ctx, &ipamv1.GetPoolRequest{})
			return err
		}, []string{"name"}, ""},
		{"get pool: bad name", func(ctx context.Context) error {
			_, err := n.pools.GetPool(ctx, &ipamv1.GetPoolRequest{Name: "pool/valid"})
			return err
		}, []string{"name"}, ""},
		{"get pool: bad ID", func(ctx context.Context) error {
			_, err := n.pools.GetPool(ctx, &ipamv1.GetPoolRequest{Name: "pools/Valid"})
			return err
		}, []string{"name"}, ""},

		// ListPools.
		{"list pools: negative page_size", listPools(&ipamv1.ListPoolsRequest{PageSize: -1}), []string{"page_size"}, ""},
		{"list pools: garbage page_token", listPools(&ipamv1.ListPoolsRequest{PageToken: "not-a-token!"}), []string{"page_token"}, ""},
		{"list pools: page_token of another filter", listPools(&ipamv1.ListPoolsRequest{PageToken: otherToken, Filter: `labels.env = "prod"`}), []string{"page_token"}, ""},
		{"list pools: unknown filter field", listPools(&ipamv1.ListPoolsRequest{Filter: `color = "red"`}), []string{"filter"}, ""},
		{"list pools: filter syntax", listPools(&ipamv1.ListPoolsRequest{Filter: `labels.env = `}), []string{"filter"}, ""},
		{"list pools: tenant with :*", listPools(&ipamv1.ListPoolsRequest{Filter: `tenant:*`}), []string{"filter"}, "tenant"},
		{"list pools: filter with OR", listPools(&ipamv1.ListPoolsRequest{Filter: `tenant = "a" OR tenant = "b"`}), []string{"filter"}, ""},

		// UpdatePool.
		{"update: no pool", updatePool(nil, "labels"), []string{"pool.name"}, ""},
		{"update: bad name", updatePool(&ipamv1.Pool{Name: "valid"}, "labels"), []string{"pool.name"}, ""},
		{"update: no mask", updatePool(&ipamv1.Pool{Name: "pools/valid"}), []string{"update_mask"}, ""},
		{"update: output-only field in mask", updatePool(&ipamv1.Pool{Name: "pools/valid"}, "uid"), []string{"update_mask.paths[0]"}, ""},
		{"update: unknown field in mask", updatePool(&ipamv1.Pool{Name: "pools/valid"}, "labels", "name"), []string{"update_mask.paths[1]"}, ""},
		{"update: bad etag", updatePool(&ipamv1.Pool{Name: "pools/valid", Etag: "not an etag!"}, "labels"), []string{"pool.etag"}, ""},
		{"update: CIDR with host bits", updatePool(&ipamv1.Pool{Name: "pools/valid", Ranges: []string{"192.0.2.5/28"}}, "ranges"), []string{"pool.ranges[0]"}, "192.0.2.0/28"},
		{"update: no ranges left", updatePool(&ipamv1.Pool{Name: "pools/valid"}, "ranges"), []string{"pool.ranges"}, ""},
		{"update: bad label", updatePool(&ipamv1.Pool{Name: "pools/valid", Labels: map[string]string{"-bad": "x"}}, "labels"), []string{"pool.labels[-bad]"}, ""},

		// DeletePool.
		{"delete: bad name", func(ctx context.Context) error {
			_, err := n.pools.DeletePool(ctx, &ipamv1.DeletePoolRequest{Name: "pools/"})
			return err
		}, []string{"name"}, ""},
		{"delete: bad etag", func(ctx context.Context) error {
			_, err := n.pools.DeletePool(ctx, &ipamv1.DeletePoolRequest{Name: "pools/valid", Etag: "-1"})
			return err
		}, []string{"etag"}, ""},

		// Allocate.
		{"allocate: no parent", alloc("", okAlloc()), []string{"parent"}, ""},
		{"allocate: parent not a tenant", alloc("tenant/c1", okAlloc()), []string{"parent"}, ""},
		{"allocate: upper-case tenant", alloc("tenants/C1", okAlloc()), []string{"parent"}, ""},
		{"allocate: wildcard tenant", alloc("tenants/-", okAlloc()), []string{"parent"}, ""},
		{"allocate: tenant starting with a space", alloc("tenants/ c1", okAlloc()), []string{"parent"}, ""},
		{"allocate: tenant starting with '_'", alloc("tenants/_c1", okAlloc()), []string{"parent"}, ""},
		{"allocate: namespace starting with upper case", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.Namespace = "Web" })), []string{"allocation.namespace"}, ""},
		{"allocate: no allocation", alloc("tenants/c1", nil), []string{"allocation"}, ""},
		{"allocate: missing owner", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.Owner = "" })), []string{"allocation.owner"}, ""},
		{"allocate: owner with spaces", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.Owner = "my service" })), []string{"allocation.owner"}, ""},
		{"allocate: owner too long", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.Owner = longOwner })), []string{"allocation.owner"}, ""},
		{"allocate: port 0", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) {
			a.Ports = []*ipamv1.Port{{Port: 80}, {Port: 0}}
		})), []string{"allocation.ports[1].port"}, ""},
		{"allocate: port too high", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) {
			a.Ports = []*ipamv1.Port{{Port: 65536}}
		})), []string{"allocation.ports[0].port"}, ""},
		{"allocate: repeated port", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) {
			a.Ports = []*ipamv1.Port{{Port: 80}, {Port: 80, Protocol: ipamv1.Protocol_PROTOCOL_TCP}}
		})), []string{"allocation.ports[1]"}, ""},
		{"allocate: unknown protocol", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) {
			a.Ports = []*ipamv1.Port{{Port: 80, Protocol: 99}}
		})), []string{"allocation.ports[0].protocol"}, ""},
		{"allocate: ttl too short", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.Ttl = dur(5 * time.Second) })), []string{"allocation.ttl"}, ""},
		{"allocate: ttl too long", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.Ttl = dur(366 * 24 * time.Hour) })), []string{"allocation.ttl"}, ""},
		{"allocate: invalid ttl", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.Ttl = &durationpb.Duration{Seconds: 20, Nanos: -1} })), []string{"allocation.ttl"}, ""},
		{"allocate: repeated family", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) {
			a.IpFamilies, a.IpFamilyPolicy = []ipamv1.IPFamily{fam4, fam4}, requireDual
		})), []string{"allocation.ip_families[1]"}, ""},
		{"allocate: two families single-stack", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) {
			a.IpFamilies = []ipamv1.IPFamily{fam4, fam6}
		})), []string{"allocation.ip_families"}, ""},
		{"allocate: unknown family policy", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.IpFamilyPolicy = 7 })), []string{"allocation.ip_family_policy"}, ""},
		{"allocate: bad requested address", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) {
			a.RequestedAddresses = []string{"192.0.2.1/32"}
		})), []string{"allocation.requested_addresses[0]"}, ""},
		{"allocate: two requested IPv4", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) {
			a.RequestedAddresses = []string{"192.0.2.1", "192.0.2.2"}
		})), []string{"allocation.requested_addresses[1]"}, ""},
		{"allocate: zoned address", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) {
			a.RequestedAddresses = []string{"2001:db8::1%eth0"}
		})), []string{"allocation.requested_addresses[0]"}, ""},
		{"allocate: bad requested pool", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.RequestedPool = "valid" })), []string{"allocation.requested_pool"}, ""},
		{"allocate: bad namespace", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.Namespace = "Kube_System" })), []string{"allocation.namespace"}, ""},
		{"allocate: bad owner label", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) {
			a.OwnerLabels = map[string]string{"app": "web", "bad key": "x"}
		})), []string{"allocation.owner_labels[bad key]"}, ""},
		{"allocate: sharing key with spaces", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.SharingKey = "a b" })), []string{"allocation.sharing_key"}, ""},
		{"allocate: address count too high", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.AddressCount = 17 })), []string{"allocation.address_count"}, ""},
		{"allocate: negative address count", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.AddressCount = -1 })), []string{"allocation.address_count"}, ""},
		{"allocate: address count with sharing key", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.AddressCount, a.SharingKey = 3, "k" })), []string{"allocation.sharing_key"}, ""},
		{"allocate: address count with requested addresses", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) {
			a.AddressCount, a.RequestedAddresses = 2, []string{"192.0.2.1"}
		})), []string{"allocation.requested_addresses"}, ""},
		{"allocate: address count with global group", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) {
			a.AddressCount, a.GlobalGroup = 2, "pools/valid/globalGroups/g"
		})), []string{"allocation.global_group"}, ""},
		{"allocate: unknown traffic policy", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.TrafficPolicy = 9 })), []string{"allocation.traffic_policy"}, ""},
		{"allocate: empty endpoint node", alloc("tenants/c1", withAlloc(func(a *ipamv1.Allocation) { a.EndpointNodes = []string{"n1", ""} })), []string{"allocation.endpoint_nodes[1]"}, ""},
		{"allocate: bad request_id", func(ctx context.Context) error {
			_, err := n.allocs.Allocate(ctx, &ipamv1.AllocateRequest{Parent: "tenants/c1", Allocation: okAlloc(), RequestId: strings.Repeat("r", 129)})
			return err
		}, []string{"request_id"}, ""},
		{"allocate: several bad fields", alloc("tenants/c1", &ipamv1.Allocation{
			Ports: []*ipamv1.Port{{Port: 80}, {Port: -1}}, Ttl: dur(time.Second),
		}), []string{"allocation.owner", "allocation.ports[1].port", "allocation.ttl"}, ""},

		// Release.
		{"release: nothing named", release(&ipamv1.ReleaseRequest{}), []string{"name"}, ""},
		{"release: name and owner", release(&ipamv1.ReleaseRequest{Name: validName, Parent: "tenants/c1", Owner: "ns/svc"}), []string{"name"}, ""},
		{"release: bad name", release(&ipamv1.ReleaseRequest{Name: "tenants/c1/allocations/svc"}), []string{"name"}, ""},
		{"release: parent without owner", release(&ipamv1.ReleaseRequest{Parent: "tenants/c1"}), []string{"owner"}, ""},
		{"release: bad parent", release(&ipamv1.ReleaseRequest{Parent: "tenants/-", Owner: "ns/svc"}), []string{"parent"}, ""},
		{"release: negative hold", release(&ipamv1.ReleaseRequest{Name: validName, Hold: dur(-time.Second)}), []string{"hold"}, ""},
		{"release: hold too long", release(&ipamv1.ReleaseRequest{Name: validName, Hold: dur(31 * 24 * time.Hour)}), []string{"hold"}, ""},
		{"release: bad etag", release(&ipamv1.ReleaseRequest{Name: validName, Etag: "?"}), []string{"etag"}, ""},

		// GetAllocation.
		{"get allocation: bad ID", func(ctx context.Context) error {
			_, err := n.allocs.GetAllocation(ctx, &ipamv1.GetAllocationRequest{Name: "tenants/c1/allocations/ns-svc"})
			return err
		}, []string{"name"}, ""},
		{"get allocation: pool name", func(ctx context.Context) error {
			_, err := n.allocs.GetAllocation(ctx, &ipamv1.GetAllocationRequest{Name: "pools/valid"})
			return err
		}, []string{"name"}, ""},

		// ListAllocations.
		{"list allocations: bad parent", listAllocs(&ipamv1.ListAllocationsRequest{Parent: "tenants/"}), []string{"parent"}, ""},
		{"list allocations: bad page_token", listAllocs(&ipamv1.ListAllocationsRequest{Parent: "tenants/c1", PageToken: "eyJ4Ijp9"}), []string{"page_token"}, ""},
		{"list allocations: pool page_token", listAllocs(&ipamv1.ListAllocationsRequest{Parent: "tenants/c1", PageToken: otherToken}), []string{"page_token"}, ""},
		{"list allocations: unknown filter field", listAllocs(&ipamv1.ListAllocationsRequest{Parent: "tenants/c1", Filter: `tenant = "c1"`}), []string{"filter"}, ""},
		{"list allocations: negative page_size", listAllocs(&ipamv1.ListAllocationsRequest{Parent: "tenants/c1", PageSize: -5}), []string{"page_size"}, ""},

		// RenewAllocation.
		{"renew: ttl too short", func(ctx context.Context) error {
			_, err := n.allocs.RenewAllocation(ctx, &ipamv1.RenewAllocationRequest{Name: validName, Ttl: dur(time.Second)})
			return err
		}, []string{"ttl"}, ""},
		{"renew: bad name and etag", func(ctx context.Context) error {
			_, err := n.allocs.RenewAllocation(ctx, &ipamv1.RenewAllocationRequest{Name: "tenants/c1", Etag: "!"})
			return err
		}, []string{"name", "etag"}, ""},

		// WatchAllocations.
		{"watch: bad parent", watchAllocs(&ipamv1.WatchAllocationsRequest{Parent: "c1"}), []string{"parent"}, ""},
		{"watch: bad resume_token", watchAllocs(&ipamv1.WatchAllocationsRequest{Parent: "tenants/c1", ResumeToken: "r-1"}), []string{"resume_token"}, ""},

		// ListAuditRecords.
		{"audit: bad parent", func(ctx context.Context) error {
			_, err := n.audit.ListAuditRecords(ctx, &ipamv1.ListAuditRecordsRequest{Parent: "tenants/C1"})
			return err
		}, []string{"parent"}, ""},
		{"audit: unknown action", func(ctx context.Context) error {
			_, err := n.audit.ListAuditRecords(ctx, &ipamv1.ListAuditRecordsRequest{Parent: "tenants/c1", Filter: `action = "DANCE"`})
			return err
		}, []string{"filter"}, ""},
		{"audit: unknown filter field", func(ctx context.Context) error {
			_, err := n.audit.ListAuditRecords(ctx, &ipamv1.ListAuditRecordsRequest{Parent: "tenants/c1", Filter: `labels.app = "x"`})
			return err
		}, []string{"filter"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(ctxT(t))
			wantStatus(t, err, codes.InvalidArgument)
			got := violations(err)
			diff(t, "field violations", tc.want, got)
			if tc.in != "" && len(got) > 0 {
				if d := violation(err, got[0]); !strings.Contains(d, tc.in) {
					t.Errorf("description %q does not contain %q", d, tc.in)
				}
			}
		})
	}

	// Nothing was written.
	pools, err := n.pools.ListPools(ctxT(t), &ipamv1.ListPoolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pools.GetPools() {
		names = append(names, p.GetName())
	}
	diff(t, "pools", []string{"pools/valid", "pools/valid-2"}, names)
	if got := getPool(t, n, "valid"); got.GetEtag() != valid.GetEtag() {
		t.Errorf("pool valid changed: %v", got)
	}
	allocs, err := n.allocs.ListAllocations(ctxT(t), &ipamv1.ListAllocationsRequest{Parent: "tenants/-"})
	if err != nil {
		t.Fatal(err)
	}
	if len(allocs.GetAllocations()) != 0 {
		t.Errorf("allocations written: %v", allocs.GetAllocations())
	}
	recs, err := n.audit.ListAuditRecords(ctxT(t), &ipamv1.ListAuditRecordsRequest{Parent: "tenants/-"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs.GetAuditRecords()) != 0 {
		t.Errorf("audit records written: %v", recs.GetAuditRecords())
	}
}
