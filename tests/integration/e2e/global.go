package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// GlobalTenants are the two tenants ("clusters") of a global-address lab:
// node i belongs to GlobalTenants[i%2].
var GlobalTenants = [2]string{"east", "west"}

// GlobalTenantOf is Options.TenantOf for a global-address lab.
func GlobalTenantOf(i int) string { return GlobalTenants[i%2] }

// GlobalGroup is the global group of a global-address lab, on pool "bgp".
const GlobalGroup = "pools/bgp/globalGroups/web"

// GlobalOwner is the Service that joins the group in every tenant.
const GlobalOwner = "shop/web"

// SetupGlobal makes the IPAM side of a global-address lab on a Cluster
// built with TenantOf GlobalTenantOf and FRR started: pool "bgp", the
// group granting both tenants, in each tenant a BGP peer "frr" and an
// advertisement of the pool, and each tenant's GlobalOwner joined with its
// own nodes as endpoint nodes (role backup for the tenants in backup). It
// returns the group's IPv4 host prefix.
func (c *Cluster) SetupGlobal(ctx context.Context, backup ...string) (netip.Prefix, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*callTimeout)
	defer cancel()
	if err := c.CreatePool(ctx, "bgp", BGPPoolRanges...); err != nil {
		return netip.Prefix{}, err
	}
	if _, err := c.Groups.CreateGlobalGroup(ctx, &ipamv1.CreateGlobalGroupRequest{
		Parent: "pools/bgp", GlobalGroupId: "web",
		GlobalGroup: &ipamv1.GlobalGroup{Tenants: []string{"tenants/" + GlobalTenants[0], "tenants/" + GlobalTenants[1]}},
	}); err != nil {
		return netip.Prefix{}, fmt.Errorf("e2e: create global group: %w", err)
	}
	var prefix netip.Prefix
	for _, tenant := range GlobalTenants {
		parent := "tenants/" + tenant
		if _, err := c.Config.CreateBGPPeer(ctx, &ipamv1.CreateBGPPeerRequest{Parent: parent, BgpPeerId: "frr", BgpPeer: BGPPeer(FRRAddr4, NodeASN, nil)}); err != nil {
			return netip.Prefix{}, fmt.Errorf("e2e: %s: create BGP peer: %w", tenant, err)
		}
		if _, err := c.Config.CreateBGPAdvertisement(ctx, &ipamv1.CreateBGPAdvertisementRequest{Parent: parent, BgpAdvertisementId: "adv",
			BgpAdvertisement: &ipamv1.BGPAdvertisement{Pools: []string{"pools/bgp"}}}); err != nil {
			return netip.Prefix{}, fmt.Errorf("e2e: %s: create BGP advertisement: %w", tenant, err)
		}
		role := ipamv1.GlobalRole_GLOBAL_ROLE_ACTIVE
		for _, b := range backup {
			if b == tenant {
				role = ipamv1.GlobalRole_GLOBAL_ROLE_BACKUP
			}
		}
		resp, err := c.Allocations.Allocate(ctx, &ipamv1.AllocateRequest{Parent: parent, Allocation: &ipamv1.Allocation{
			Owner: GlobalOwner, GlobalGroup: GlobalGroup, GlobalRole: role, EndpointNodes: c.nodesOf(tenant),
		}})
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("e2e: %s: join the global group: %w", tenant, err)
		}
		addrs, err := Addrs(resp.GetAllocation())
		if err != nil {
			return netip.Prefix{}, err
		}
		p := HostPrefix(addrs[0])
		if prefix.IsValid() && p != prefix {
			return netip.Prefix{}, fmt.Errorf("e2e: %s got %v, the other tenant %v", tenant, p, prefix)
		}
		prefix = p
	}
	return prefix, nil
}

// nodesOf returns the names of tenant's nodes.
func (c *Cluster) nodesOf(tenant string) []string {
	var out []string
	for _, n := range c.Nodes {
		if n.Tenant == tenant {
			out = append(out, n.Name)
		}
	}
	return out
}

// NodeAddrsOf returns the IPv4 addresses of the nodes of the tenants.
func (c *Cluster) NodeAddrsOf(tenants ...string) []netip.Addr {
	var out []netip.Addr
	for _, n := range c.Nodes {
		for _, t := range tenants {
			if n.Tenant == t {
				out = append(out, NodeAddr4(n.Index))
			}
		}
	}
	return out
}

// AllocationID is the ID the IPAM derives from an owner: "a" and the first
// 20 hex digits of its SHA-256.
func AllocationID(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return "a" + hex.EncodeToString(sum[:10])
}

// SetEndpoints sets the endpoint nodes of tenant's owner: what the
// Kubernetes adapter does when the Service's ready endpoints change. ready
// false: none; true: every node of the tenant.
func (c *Cluster) SetEndpoints(ctx context.Context, tenant, owner string, ready bool) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var nodes []string
	if ready {
		nodes = c.nodesOf(tenant)
	}
	name := "tenants/" + tenant + "/allocations/" + AllocationID(owner)
	_, err := c.Allocations.UpdateAllocation(ctx, &ipamv1.UpdateAllocationRequest{
		Allocation: &ipamv1.Allocation{Name: name, EndpointNodes: nodes},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"endpoint_nodes"}},
	})
	if err != nil {
		return fmt.Errorf("e2e: set endpoints of %s: %w", name, err)
	}
	return nil
}

// BenchGlobalWithdraw measures, trials times each, how long after a
// Service's ready endpoints are gone its route is gone from FRR: for a
// global group's member (two tenants announce the address; one tenant's
// endpoints vanish, FRR keeps the other's path only), and, as the
// reference, for a one-cluster Service with externalTrafficPolicy Local
// (its only endpoint node's path goes). Both are the same chain: the
// endpoint change reaches the IPAM (UpdateAllocation), the planner
// withdraws, the announcer's GoBGP sends the withdrawal. It needs root.
func BenchGlobalWithdraw(ctx context.Context, bin string, trials int, log io.Writer) (global, local Samples, err error) {
	if log == nil {
		log = io.Discard
	}
	c, err := New(ctx, Options{Bin: bin, Nodes: 2, TenantOf: GlobalTenantOf, Logf: func(f string, a ...any) { fmt.Fprintf(log, f+"\n", a...) }})
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}()
	frr, err := c.StartFRR(ctx, NodeASN, false, nil)
	if err != nil {
		return nil, nil, err
	}
	p, err := c.SetupGlobal(ctx)
	if err != nil {
		return nil, nil, err
	}
	both := c.NodeAddrsOf(GlobalTenants[:]...)
	if err := WaitNextHops(ctx, frr, p, 30*time.Second, both...); err != nil {
		return nil, nil, err
	}
	// The reference: a LOCAL Service of the first tenant on its node.
	east := "tenants/" + GlobalTenants[0]
	resp, err := c.Allocations.Allocate(ctx, &ipamv1.AllocateRequest{Parent: east, Allocation: &ipamv1.Allocation{
		Owner: "shop/local", RequestedPool: "pools/bgp", TrafficPolicy: ipamv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL, EndpointNodes: c.nodesOf(GlobalTenants[0]),
	}})
	if err != nil {
		return nil, nil, fmt.Errorf("e2e: allocate the local reference: %w", err)
	}
	addrs, err := Addrs(resp.GetAllocation())
	if err != nil {
		return nil, nil, err
	}
	lp := HostPrefix(addrs[0])
	eastAddrs, westAddrs := c.NodeAddrsOf(GlobalTenants[0]), c.NodeAddrsOf(GlobalTenants[1])
	if err := WaitNextHops(ctx, frr, lp, 30*time.Second, eastAddrs...); err != nil {
		return nil, nil, err
	}
	measure := func(owner string, prefix netip.Prefix, remaining []netip.Addr, wantBack []netip.Addr) (time.Duration, error) {
		start := time.Now()
		if err := c.SetEndpoints(ctx, GlobalTenants[0], owner, false); err != nil {
			return 0, err
		}
		if err := waitHops(ctx, frr, prefix, remaining); err != nil {
			return 0, err
		}
		took := time.Since(start)
		if err := c.SetEndpoints(ctx, GlobalTenants[0], owner, true); err != nil {
			return 0, err
		}
		return took, WaitNextHops(ctx, frr, prefix, 30*time.Second, wantBack...)
	}
	for i := range trials {
		g, err := measure(GlobalOwner, p, westAddrs, both)
		if err != nil {
			return global, local, fmt.Errorf("global trial %d: %w", i, err)
		}
		global = append(global, g)
		l, err := measure("shop/local", lp, nil, eastAddrs)
		if err != nil {
			return global, local, fmt.Errorf("local trial %d: %w", i, err)
		}
		local = append(local, l)
		fmt.Fprintf(log, "trial %d: global %v, local %v\n", i, g.Round(time.Millisecond), l.Round(time.Millisecond))
	}
	return global, local, nil
}

// waitHops polls FRR every 5 ms (a benchmark's resolution) until prefix's
// next hops are want (none: withdrawn).
func waitHops(ctx context.Context, r netlab.Router, prefix netip.Prefix, want []netip.Addr) error {
	return netlab.Eventually(ctx, 30*time.Second, 5*time.Millisecond, func(ctx context.Context) error {
		got, err := NextHops(ctx, r, prefix)
		if err != nil {
			return err
		}
		if !sameAddrs(got, want) {
			return fmt.Errorf("%s: %s via %v, want %v", r.Name(), prefix, got, want)
		}
		return nil
	})
}
