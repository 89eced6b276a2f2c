package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/netlab"
	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// MetalLB's usual configuration: one BGP advertisement with no peer list, a
// dual-stack pool, and IPv4 and IPv6 peers at FRR, BIRD and gobgpd. Each
// router gets the IPv4 prefix over its IPv4 sessions only and the IPv6
// prefix over its IPv6 sessions only; no announcerd logs a failure or a
// refusal, however often the plan changes; and each announcer's status
// lists each prefix under exactly the peers that got it.
func TestBGPDualStackAllPeers(t *testing.T) {
	requireLab(t, netlab.FRRBgpd, "vtysh", "bird", "birdc", "gobgpd", "gobgp")
	c := newCluster(t, e2e.Options{Nodes: 2})
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
	peers4 := map[string]netip.Addr{"frr": e2e.FRRAddr4, "bird": e2e.BIRDAddr4, "gobgpd": e2e.GoBGPdAddr4}
	peers6 := map[string]netip.Addr{"frr6": e2e.FRRAddr6, "bird6": e2e.BIRDAddr6, "gobgpd6": e2e.GoBGPdAddr6}
	asn := map[string]uint32{"frr": e2e.NodeASN, "bird": e2e.BIRDASN, "gobgpd": e2e.GoBGPdASN}
	for id, a := range peers4 {
		must(t, c.CreateBGPPeer(ctx, id, e2e.BGPPeer(a, asn[id], nil)))
	}
	for id, a := range peers6 {
		must(t, c.CreateBGPPeer(ctx, id, e2e.BGPPeer(a, asn[strings.TrimSuffix(id, "6")], nil)))
	}
	must(t, c.CreateBGPAdvertisement(ctx, "all", &ipamv1.BGPAdvertisement{}))

	var prefixes4, prefixes6 []netip.Prefix
	allocate := func(owner string) {
		t.Helper()
		alloc, err := c.Allocate(ctx, owner, "bgp", true)
		if err != nil {
			t.Fatal(err)
		}
		addrs, err := e2e.Addrs(alloc)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if a.Is4() {
				prefixes4 = append(prefixes4, e2e.HostPrefix(a))
			} else {
				prefixes6 = append(prefixes6, e2e.HostPrefix(a))
			}
		}
		t.Logf("allocated %v to %s", addrs, owner)
	}
	// Several plan changes: two allocations, one after the other.
	allocate("default/api")
	allocate("default/web")

	nodes4 := []netip.Addr{e2e.NodeAddr4(0), e2e.NodeAddr4(1)}
	nodes6 := []netip.Addr{e2e.NodeAddr6(0), e2e.NodeAddr6(1)}
	for _, r := range []netlab.Router{frr, bird, gobgpd} {
		for _, p := range prefixes4 {
			if err := e2e.WaitNextHops(ctx, r, p, 30*time.Second, nodes4...); err != nil {
				t.Error(err)
			}
		}
		for _, p := range prefixes6 {
			if err := e2e.WaitNextHops(ctx, r, p, 30*time.Second, nodes6...); err != nil {
				t.Error(err)
			}
		}
	}

	// The status each announcer reports: IPv4 prefixes under the IPv4
	// peers only, IPv6 prefixes under the IPv6 peers only.
	names := func(ids map[string]netip.Addr) []string {
		var out []string
		for id := range ids {
			out = append(out, e2e.Parent+"/bgpPeers/"+id)
		}
		slices.Sort(out)
		return out
	}
	want := map[string][]string{}
	for _, p := range prefixes4 {
		want[p.String()] = names(peers4)
	}
	for _, p := range prefixes6 {
		want[p.String()] = names(peers6)
	}
	for _, n := range c.Nodes {
		var diff string
		err := netlab.Eventually(ctx, 15*time.Second, 50*time.Millisecond, func(ctx context.Context) error {
			a, err := n.Announcer(ctx)
			if err != nil {
				return err
			}
			got := map[string][]string{}
			for _, an := range a.GetStatus().GetAnnounced() {
				if an.GetProtocol() == ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_BGP {
					got[an.GetAddress()] = an.GetPeers()
				}
			}
			if diff = cmp.Diff(want, got); diff != "" {
				return fmt.Errorf("status differs")
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s's reported BGP announcements (-want +got):\n%s", n.Name, diff)
		}
	}

	// Every node introduces itself to FRR under its node name (the
	// hostname capability), not under the machine's host name.
	for i, n := range c.Nodes {
		for _, a := range []netip.Addr{e2e.NodeAddr4(i), e2e.NodeAddr6(i)} {
			got, err := frrHostname(ctx, frr, a)
			if err != nil {
				t.Fatal(err)
			}
			if got != n.Name {
				t.Errorf("FRR shows neighbor %s as host %q, want the node name %q", a, got, n.Name)
			}
		}
	}

	// No warning about the BGP plan, nothing refused, on any plan change.
	for _, n := range c.Nodes {
		b, err := os.ReadFile(n.Proc().LogPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "BGP plan") || strings.Contains(line, "refused") {
				t.Errorf("%s logged: %s", n.Name, line)
			}
		}
	}
}

// frrHostname is the host name FRR shows for a neighbor ("Hostname:" in
// show bgp neighbors), from the neighbor's hostname capability.
func frrHostname(ctx context.Context, frr *netlab.FRR, addr netip.Addr) (string, error) {
	out, err := frr.Vtysh(ctx, "show bgp neighbors "+addr.String()+" json")
	if err != nil {
		return "", err
	}
	var m map[string]struct {
		Hostname string `json:"hostname"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return "", fmt.Errorf("frr neighbor json: %w", err)
	}
	n, ok := m[addr.String()]
	if !ok {
		return "", fmt.Errorf("frr has no neighbor %s", addr)
	}
	return n.Hostname, nil
}
