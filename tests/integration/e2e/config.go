package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// callTimeout bounds each API call.
const callTimeout = 10 * time.Second

// CreatePool creates pool id with ranges, open to every tenant.
func (c *Cluster) CreatePool(ctx context.Context, id string, ranges ...string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := c.Pools.CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: id, Pool: &ipamv1.Pool{Ranges: ranges}})
	if err != nil {
		return fmt.Errorf("e2e: create pool %s: %w", id, err)
	}
	return nil
}

// CreateL2Advertisement creates an L2 advertisement of pool on interfaces
// (empty: all).
func (c *Cluster) CreateL2Advertisement(ctx context.Context, id, pool string, interfaces ...string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := c.Config.CreateL2Advertisement(ctx, &ipamv1.CreateL2AdvertisementRequest{
		Parent: Parent, L2AdvertisementId: id,
		L2Advertisement: &ipamv1.L2Advertisement{Pools: []string{"pools/" + pool}, Interfaces: interfaces},
	})
	if err != nil {
		return fmt.Errorf("e2e: create L2 advertisement %s: %w", id, err)
	}
	return nil
}

// Allocate allocates for owner ("namespace/name") from pool, dual-stack
// when dual is set.
func (c *Cluster) Allocate(ctx context.Context, owner, pool string, dual bool) (*ipamv1.Allocation, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	a := &ipamv1.Allocation{Owner: owner, RequestedPool: "pools/" + pool}
	if dual {
		a.IpFamilyPolicy = ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_REQUIRE_DUAL_STACK
	}
	resp, err := c.Allocations.Allocate(ctx, &ipamv1.AllocateRequest{Parent: Parent, Allocation: a})
	if err != nil {
		return nil, fmt.Errorf("e2e: allocate %s: %w", owner, err)
	}
	return resp.GetAllocation(), nil
}

// Release frees an allocation's addresses at once.
func (c *Cluster) Release(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := c.Allocations.Release(ctx, &ipamv1.ReleaseRequest{Name: name, Hold: durationpb.New(0)})
	if err != nil {
		return fmt.Errorf("e2e: release %s: %w", name, err)
	}
	return nil
}

// Addrs parses an allocation's addresses.
func Addrs(a *ipamv1.Allocation) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range a.GetAddresses() {
		addr, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("e2e: allocation address %q: %w", s, err)
		}
		out = append(out, addr)
	}
	return out, nil
}

// Announced returns, from every live node's last status, the nodes that
// report announcing each address or prefix over proto.
func (c *Cluster) Announced(ctx context.Context, proto ipamv1.AnnouncementProtocol) (map[string][]string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.Announcers.ListAnnouncers(ctx, &ipamv1.ListAnnouncersRequest{Parent: Parent})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, a := range resp.GetAnnouncers() {
		node := a.GetName()[strings.LastIndex(a.GetName(), "/")+1:]
		for _, ad := range a.GetStatus().GetAnnounced() {
			if ad.GetProtocol() == proto {
				out[ad.GetAddress()] = append(out[ad.GetAddress()], node)
			}
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out, nil
}

// WaitL2Owner waits until exactly one node reports answering for each of
// addrs, the same node for all, and returns it.
func (c *Cluster) WaitL2Owner(ctx context.Context, timeout time.Duration, addrs ...netip.Addr) (*Node, error) {
	var owner *Node
	err := netlab.Eventually(ctx, timeout, 20*time.Millisecond, func(ctx context.Context) error {
		ann, err := c.Announced(ctx, ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2)
		if err != nil {
			return err
		}
		var name string
		for _, a := range addrs {
			nodes := ann[a.String()]
			if len(nodes) != 1 {
				return fmt.Errorf("%s announced by %v", a, nodes)
			}
			if name != "" && nodes[0] != name {
				return fmt.Errorf("the addresses of one allocation are announced by different nodes: %v", ann)
			}
			name = nodes[0]
		}
		owner = c.NodeByName(name)
		return nil
	})
	return owner, err
}
