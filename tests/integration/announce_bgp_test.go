package integration

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/netlab"
	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// bgpLabels: node0 and node1 peer with FRR, node2 does not.
func bgpLabels(i int) map[string]string {
	if i < 2 {
		return map[string]string{"bgp": "frr"}
	}
	return map[string]string{"rack": "b"}
}

// A BGP advertisement with communities (one through an alias), a large
// community and a local preference reaches a real FRR (iBGP, so LOCAL_PREF
// is carried) from exactly the two nodes its BGPPeer selects, over IPv4 and
// IPv6; BIRD and gobgpd (eBGP, every node) get the route too; releasing the
// allocation withdraws it everywhere.
func TestBGPAnnouncement(t *testing.T) {
	requireLab(t, netlab.FRRBgpd, "vtysh", "bird", "birdc", "gobgpd", "gobgp")
	c := newCluster(t, e2e.Options{Nodes: 3, Labels: bgpLabels})
	ctx := context.Background()
	frr, err := c.StartFRR(ctx, e2e.NodeASN, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	bird, err := c.StartBIRD(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gobgpd, err := c.StartGoBGPd(ctx)
	if err != nil {
		t.Fatal(err)
	}
	must(t, c.CreatePool(ctx, "bgp", e2e.BGPPoolRanges...))
	must(t, c.CreateCommunity(ctx, "names", map[string]string{"gold": "65000:100"}))
	frrNodes := map[string]string{"bgp": "frr"}
	must(t, c.CreateBGPPeer(ctx, "frr", e2e.BGPPeer(e2e.FRRAddr4, e2e.NodeASN, frrNodes)))
	must(t, c.CreateBGPPeer(ctx, "frr6", e2e.BGPPeer(e2e.FRRAddr6, e2e.NodeASN, frrNodes)))
	must(t, c.CreateBGPPeer(ctx, "bird", e2e.BGPPeer(e2e.BIRDAddr4, e2e.BIRDASN, nil)))
	must(t, c.CreateBGPPeer(ctx, "gobgpd", e2e.BGPPeer(e2e.GoBGPdAddr4, e2e.GoBGPdASN, nil)))
	must(t, c.CreateBGPAdvertisement(ctx, "adv", &ipamv1.BGPAdvertisement{
		Pools:       []string{"pools/bgp"},
		Communities: []string{"65000:200", "gold", "large:64512:1:2"},
		LocalPref:   250,
	}))
	alloc, err := c.Allocate(ctx, "default/api", "bgp", true)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := e2e.Addrs(alloc)
	if err != nil {
		t.Fatal(err)
	}
	p4, p6 := e2e.HostPrefix(addrs[0]), e2e.HostPrefix(addrs[1])
	t.Logf("allocated %v", addrs)

	want := func(nextHops ...netip.Addr) []path {
		var out []path
		for _, nh := range nextHops {
			out = append(out, path{NextHop: nh, Communities: []string{"65000:100", "65000:200"}, Large: []string{"64512:1:2"}, LocalPref: 250})
		}
		return out
	}
	// FRR: from node0 and node1 only, with every attribute.
	if err := waitPaths(ctx, frr, p4, want(e2e.NodeAddr4(0), e2e.NodeAddr4(1)), true); err != nil {
		t.Error(err)
	}
	if err := waitPaths(ctx, frr, p6, want(e2e.NodeAddr6(0), e2e.NodeAddr6(1)), true); err != nil {
		t.Error(err)
	}
	for i, n := range c.Nodes {
		st, err := frr.NeighborState(ctx, e2e.NodeAddr4(i))
		if err != nil {
			t.Fatal(err)
		}
		if want := i < 2; (st == "Established") != want {
			t.Errorf("FRR's session with %s is %s; want established: %v", n.Name, st, want)
		}
	}
	// The IPAM knows which peers each node has: node2 has no FRR session.
	a, err := c.Nodes[2].Announcer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for _, s := range a.GetStatus().GetSessions() {
		peers = append(peers, s.GetPeer())
	}
	slices.Sort(peers)
	if diff := cmp.Diff([]string{e2e.Parent + "/bgpPeers/bird", e2e.Parent + "/bgpPeers/gobgpd"}, peers); diff != "" {
		t.Errorf("node2's sessions (-want +got):\n%s", diff)
	}
	// BIRD and gobgpd: eBGP from every node, communities but no LOCAL_PREF.
	all := []netip.Addr{e2e.NodeAddr4(0), e2e.NodeAddr4(1), e2e.NodeAddr4(2)}
	ebgp := want(all...)
	for i := range ebgp {
		ebgp[i].LocalPref = 0
	}
	for _, r := range []netlab.Router{bird, gobgpd} {
		if err := waitPaths(ctx, r, p4, ebgp, false); err != nil {
			t.Error(err)
		}
	}

	must(t, c.Release(ctx, alloc.GetName()))
	for _, r := range []netlab.Router{frr, bird, gobgpd} {
		for _, p := range []netip.Prefix{p4, p6} {
			if r != frr && p == p6 {
				continue
			}
			if err := netlab.WaitNoPath(ctx, r, p, 10*time.Second); err != nil {
				t.Errorf("after release: %v", err)
			}
		}
	}
}

// SIGTERM of an announcerd withdraws its routes at once: FRR drops the
// node's path (the other node's stays) well within a second.
func TestBGPWithdrawOnSIGTERM(t *testing.T) {
	requireLab(t, netlab.FRRBgpd, "vtysh")
	c := newCluster(t, e2e.Options{Nodes: 2})
	ctx := context.Background()
	frr, err := c.StartFRR(ctx, e2e.NodeASN, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	must(t, c.CreatePool(ctx, "bgp", e2e.BGPPoolRanges...))
	must(t, c.CreateBGPPeer(ctx, "frr", e2e.BGPPeer(e2e.FRRAddr4, e2e.NodeASN, nil)))
	must(t, c.CreateBGPAdvertisement(ctx, "adv", &ipamv1.BGPAdvertisement{Pools: []string{"pools/bgp"}}))
	alloc, err := c.Allocate(ctx, "default/api", "bgp", false)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := e2e.Addrs(alloc)
	if err != nil {
		t.Fatal(err)
	}
	p := e2e.HostPrefix(addrs[0])
	if err := e2e.WaitNextHops(ctx, frr, p, 30*time.Second, e2e.NodeAddr4(0), e2e.NodeAddr4(1)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := c.Nodes[1].Terminate(); err != nil {
		t.Fatal(err)
	}
	exited := time.Since(start)
	if err := e2e.WaitNextHops(ctx, frr, p, 5*time.Second, e2e.NodeAddr4(0)); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("SIGTERM: announcerd exited after %v; FRR had dropped its path %v after the signal", exited.Round(time.Millisecond), took.Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("withdrawal took %v, want well under a second", took)
	}
}

// path is the part of a netlab.Path a test compares.
type path struct {
	NextHop     netip.Addr
	Communities []string
	Large       []string
	LocalPref   uint32
}

// waitPaths waits until r's paths for prefix are want (any order);
// LOCAL_PREF is compared only when withLocalPref.
func waitPaths(ctx context.Context, r netlab.Router, prefix netip.Prefix, want []path, withLocalPref bool) error {
	sortPaths := func(ps []path) {
		slices.SortFunc(ps, func(a, b path) int { return a.NextHop.Compare(b.NextHop) })
	}
	sortPaths(want)
	var diff string
	err := netlab.Eventually(ctx, 30*time.Second, 50*time.Millisecond, func(ctx context.Context) error {
		rib, err := r.RIB(ctx)
		if err != nil {
			return err
		}
		var got []path
		for _, p := range rib[prefix] {
			gp := path{NextHop: p.NextHop, Communities: p.Communities, Large: p.LargeCommunities}
			if withLocalPref {
				gp.LocalPref = p.LocalPref
			}
			got = append(got, gp)
		}
		sortPaths(got)
		if diff = cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			return fmt.Errorf("%s: %s (-want +got):\n%s", r.Name(), prefix, diff)
		}
		return nil
	})
	return err
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
