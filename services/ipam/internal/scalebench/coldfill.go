package scalebench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/bench"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// The shape of the stored state: 100 tenants, each with 100 nodes and 10
// BGP peers (10,000 nodes, 1,000 peers), drawing from coldPools shared
// pools. Every coldDualEvery-th allocation is dual-stack. IPv6 addresses are
// documentation space (2001:db8::/32); the IPv4 ones come from 198.18.0.0/15,
// the block RFC 2544 reserves for benchmarks, because the IPv4
// documentation blocks hold too few addresses. None of them is ever sent
// traffic: they are only written to etcd.
const (
	coldTenants  = 100
	coldNodesPer = 100
	coldPeersPer = 10
	coldPools    = 10
	// coldRareEvery: one allocation in this many has the label that
	// coldRareFilter selects.
	coldRareEvery     = 10_000
	coldDualEvery     = 16
	coldAllocsPerTxn  = 40 // 40 allocations with their claims: under etcd's 128 operations
	coldFillCallers   = 16
	coldSetupCallers  = 16
	coldV4PerPoolBits = 13 // a /19 per pool inside 198.18.0.0/15
)

func coldTenantID(t int) string { return fmt.Sprintf("scale-t%02d", t) }
func coldPoolID(p int) string   { return fmt.Sprintf("scale-p%d", p) }

// coldV6 is the n-th IPv6 address of pool p.
func coldV6(p, n int) netip.Addr {
	b := [16]byte{0x20, 0x01, 0x0d, 0xb8, 0x5c, 0xa1, 0, byte(p)}
	b[12], b[13], b[14], b[15] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return netip.AddrFrom16(b)
}

// coldV4 is the n-th IPv4 address of pool p.
func coldV4(p, n int) netip.Addr {
	v := uint32(198)<<24 | uint32(18)<<16 | uint32(p)<<coldV4PerPoolBits | uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// coldSetup creates, through ipamd's API, the tenants, pools, nodes and
// peers the allocations live among, and the pool of bench.ColdStartOnce's
// probe.
func coldSetup(ctx context.Context, conn ipamClients) error {
	if _, err := conn.pools.CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: bench.ColdPool, Pool: &ipamv1.Pool{
		Description: "ipam-scale cold start probe", Ranges: []string{bench.ColdRange},
	}}); err != nil {
		return fmt.Errorf("create pool %s: %w", bench.ColdPool, err)
	}
	for p := range coldPools {
		v4 := netip.PrefixFrom(coldV4(p, 0), 32-coldV4PerPoolBits)
		v6 := netip.PrefixFrom(coldV6(p, 0), 64)
		if _, err := conn.pools.CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: coldPoolID(p), Pool: &ipamv1.Pool{
			Description: "ipam-scale shared pool", Ranges: []string{v4.String(), v6.String()},
		}}); err != nil {
			return fmt.Errorf("create pool %d: %w", p, err)
		}
	}
	for t := range coldTenants {
		if _, err := conn.tenants.CreateTenant(ctx, &ipamv1.CreateTenantRequest{TenantId: coldTenantID(t), Tenant: &ipamv1.Tenant{
			DisplayName: fmt.Sprintf("cluster %d", t),
		}}); err != nil {
			return fmt.Errorf("create tenant %d: %w", t, err)
		}
	}
	// Nodes and peers, with a few callers at once.
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	per := coldNodesPer + coldPeersPer
	for range coldSetupCallers {
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= coldTenants*per {
					return nil
				}
				t, j := i/per, i%per
				parent := "tenants/" + coldTenantID(t)
				var err error
				if j < coldNodesPer {
					_, err = conn.announce.CreateNode(gctx, &ipamv1.CreateNodeRequest{Parent: parent, NodeId: fmt.Sprintf("node-%03d", j), Node: &ipamv1.Node{
						Labels: map[string]string{"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", j%3), "kubernetes.io/hostname": fmt.Sprintf("node-%03d", j)},
					}})
				} else {
					k := j - coldNodesPer
					_, err = conn.announce.CreateBGPPeer(gctx, &ipamv1.CreateBGPPeerRequest{Parent: parent, BgpPeerId: fmt.Sprintf("tor-%d", k), BgpPeer: &ipamv1.BGPPeer{
						MyAsn: 64512, PeerAsn: 65000 + uint32(k), PeerAddress: netip.AddrFrom4([4]byte{203, 0, 113, byte(k + 1)}).String(),
					}})
				}
				if err != nil {
					return fmt.Errorf("create node or peer %d of tenant %d: %w", j, t, err)
				}
			}
		})
	}
	return g.Wait()
}

// ipamClients are the API clients coldSetup and the list measurement use.
type ipamClients struct {
	pools    ipamv1.PoolServiceClient
	tenants  ipamv1.TenantServiceClient
	announce ipamv1.AnnouncementServiceClient
	allocs   ipamv1.AllocationServiceClient
}

// coldFiller writes allocations and their claims straight to etcd through
// the store (the store's own encoding and group commit, as the IPAM writes
// them), in transactions of coldAllocsPerTxn allocations: filling a
// million through Allocate would take this machine the better part of an
// hour, and the cold start does not care how they got there.
type coldFiller struct {
	st *store.Store
	// next is the index of the next allocation to write; v4next counts the
	// dual-stack ones per pool.
	next   int
	v4next [coldPools]int
	now    time.Time
	// distinctLabels gives every owner a label set of its own (app=its
	// name), where the benchmark's repeat (50 apps, 7 teams): a replica
	// can share the maps of equal sets, not of distinct ones.
	distinctLabels bool
}

// allocation returns the i-th allocation and its claims. Allocation i is in
// tenant i%100 and pool (i/100)%10; its IPv6 address is the n-th of its
// pool, n counting the pool's allocations.
func (f *coldFiller) allocation(i int) (*ipam.Allocation, []*ipam.Claim) {
	t, p := i%coldTenants, (i/coldTenants)%coldPools
	n := i/(coldTenants*coldPools)*coldTenants + t // unique within pool p
	tenant := coldTenantID(t)
	owner := fmt.Sprintf("ns-%03d/svc-%07d", (i/coldTenants)%500, i)
	labels := map[string]string{"app": fmt.Sprintf("app-%d", i%50), "team": fmt.Sprintf("team-%d", i%7)}
	if f.distinctLabels {
		labels["app"] = fmt.Sprintf("svc-%07d", i)
	}
	if i%coldRareEvery == coldRareEvery/2 {
		labels["tier"] = "canary" // for the rare filter's walk (coldRareFilter)
	}
	a := &ipam.Allocation{
		Tenant: tenant, ID: ipam.AllocationID(owner), UID: fmt.Sprintf("u%015x", i), Owner: owner,
		Namespace:   fmt.Sprintf("ns-%03d", (i/coldTenants)%500),
		OwnerLabels: selector.SetOf(labels),
		Families:    []ipam.Family{ipam.IPv6}, Pool: coldPoolID(p),
		Ports:      []ipam.Port{{Number: 443, Protocol: ipam.TCP}},
		CreateTime: f.now, UpdateTime: f.now,
		Created: &ipam.Creation{AuditID: fmt.Sprintf("%016x", ^uint64(f.now.UnixNano())-uint64(i)), Actor: "spiffe://beacon/adapter/" + tenant},
	}
	addrs := []netip.Addr{coldV6(p, n)}
	if i%coldDualEvery == 0 {
		addrs = append([]netip.Addr{coldV4(p, f.v4next[p])}, addrs...)
		f.v4next[p]++
		a.Families, a.FamilyPolicy = []ipam.Family{ipam.IPv4, ipam.IPv6}, ipam.PreferDualStack
	}
	a.Addrs = addrs
	claims := make([]*ipam.Claim, len(addrs))
	for j, ad := range addrs {
		claims[j] = &ipam.Claim{Addr: ad, Pool: a.Pool, Tenant: tenant, Holders: []ipam.Holder{{Allocation: a.ID, Ports: a.Ports}}}
	}
	return a, claims
}

// fillTo writes allocations until n are stored.
func (f *coldFiller) fillTo(ctx context.Context, n int, log io.Writer) error {
	if n <= f.next {
		return nil
	}
	start, t0 := f.next, time.Now()
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for range coldFillCallers {
		g.Go(func() error {
			for {
				mu.Lock()
				from := f.next
				to := min(from+coldAllocsPerTxn, n)
				var ch ipam.Change
				for i := from; i < to; i++ {
					a, claims := f.allocation(i)
					ch.Puts = append(ch.Puts, ipam.Put{Ref: ipam.Ref{Kind: ipam.KindAllocation, ID: a.Tenant + "/" + a.ID}, Value: a})
					for _, c := range claims {
						ch.Puts = append(ch.Puts, ipam.Put{Ref: ipam.Ref{Kind: ipam.KindClaim, ID: c.Addr.String()}, Value: c})
					}
				}
				f.next = to
				mu.Unlock()
				if from >= n {
					return nil
				}
				if _, _, err := f.st.Commit(gctx, ch); err != nil {
					return fmt.Errorf("fill allocations %d-%d: %w", from, to, err)
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	took := time.Since(t0)
	fmt.Fprintf(log, "filled allocations %d-%d in %v (%.0f/s)\n", start, n, took.Round(time.Millisecond), float64(n-start)/took.Seconds())
	return nil
}

// runStore runs a store over client until the returned stop is called.
func runStore(ctx context.Context, client *store.Client, log io.Writer) (*store.Store, func() error) {
	st := store.New(client, slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn})), store.Options{Workers: 4})
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- st.Run(sctx) }()
	return st, func() error {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}
}
