package integration

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/announcer/netlab"
	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// conflictRow is what the test compares of an allocation's conditions.
type conflictRow struct {
	Type, Address, MAC string
	Before             bool // the node found it by probing and does not answer
}

func conflictRows(a *ipamv1.Allocation) []conflictRow {
	var out []conflictRow
	for _, c := range a.GetConditions() {
		out = append(out, conflictRow{c.GetType(), c.GetAddress(), c.GetHardwareAddress(), strings.Contains(c.GetMessage(), "does not answer")})
	}
	slices.SortFunc(out, func(x, y conflictRow) int { return strings.Compare(x.Address, y.Address) })
	return out
}

func hostMAC(ctx context.Context, t *testing.T, h *netlab.Host) string {
	t.Helper()
	out, err := h.Run(ctx, "cat", "/sys/class/net/eth0/address")
	if err != nil {
		t.Fatalf("MAC of %s: %v: %s", h.NS, err, out)
	}
	return strings.TrimSpace(out)
}

func mustRun(ctx context.Context, t *testing.T, h *netlab.Host, args ...string) {
	t.Helper()
	if out, err := h.Run(ctx, args[0], args[1:]...); err != nil {
		t.Fatalf("%s in %s: %v: %s", strings.Join(args, " "), h.NS, err, out)
	}
}

// MetalLB #306: the client already uses both addresses of an allocation
// when it is made. The node chosen to answer for them probes first (ARP
// probe, duplicate address detection), gets the client's answers, and does
// not answer; the allocation shows a Conflict condition per address naming
// the client's MAC. Once the client lets the addresses go, a node answers
// for them and the conditions go. Then another host (the prober's
// namespace) starts using both: the owners see its gratuitous ARP and its
// solicitation from the IPv6 address, and the allocation shows those
// conflicts too.
func TestL2ConflictWithAnotherHost(t *testing.T) {
	requireLab(t, "arping", "ndisc6", "ping")
	c := newCluster(t, e2e.Options{Nodes: 2})
	ctx := context.Background()
	v4, v6 := netip.MustParseAddr("192.0.2.201"), netip.MustParseAddr("2001:db8:1::201")
	client := hostMAC(ctx, t, c.Client)
	mustRun(ctx, t, c.Client, "ip", "addr", "add", v4.String()+"/32", "dev", "eth0")
	mustRun(ctx, t, c.Client, "ip", "-6", "addr", "add", v6.String()+"/128", "dev", "eth0", "nodad")

	if err := c.CreatePool(ctx, "l2", e2e.L2PoolRanges...); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateL2Advertisement(ctx, "l2", "l2", "eth0"); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Allocations.Allocate(ctx, &ipamv1.AllocateRequest{Parent: e2e.Parent, Allocation: &ipamv1.Allocation{
		Owner: "default/web", RequestedPool: "pools/l2", RequestedAddresses: []string{v4.String(), v6.String()},
		IpFamilyPolicy: ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_REQUIRE_DUAL_STACK,
	}})
	if err != nil {
		t.Fatal(err)
	}
	name := resp.GetAllocation().GetName()
	waitRows := func(want []conflictRow, within time.Duration) {
		t.Helper()
		var got []conflictRow
		err := netlab.Eventually(ctx, within, 50*time.Millisecond, func(ctx context.Context) error {
			r, err := c.Allocations.GetAllocation(ctx, &ipamv1.GetAllocationRequest{Name: name})
			if err != nil {
				return err
			}
			got = conflictRows(r.GetAllocation())
			if !cmp.Equal(want, got) {
				return fmt.Errorf("conditions (-want +got):\n%s", cmp.Diff(want, got))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitRows([]conflictRow{
		{"Conflict", v4.String(), client, true},
		{"Conflict", v6.String(), client, true},
	}, 15*time.Second)
	ann, err := c.Announced(ctx, ipamv1.AnnouncementProtocol_ANNOUNCEMENT_PROTOCOL_L2)
	if err != nil {
		t.Fatal(err)
	}
	if n := ann[v4.String()]; len(n) > 0 {
		t.Errorf("%s reported announced by %v while the client has it", v4, n)
	}
	if n := ann[v6.String()]; len(n) > 0 {
		t.Errorf("%s reported announced by %v while the client has it", v6, n)
	}

	// The client lets them go: a node answers (its next probe round finds
	// them free), and the conditions go.
	mustRun(ctx, t, c.Client, "ip", "addr", "del", v4.String()+"/32", "dev", "eth0")
	mustRun(ctx, t, c.Client, "ip", "-6", "addr", "del", v6.String()+"/128", "dev", "eth0")
	waitRows(nil, 30*time.Second)
	var owner *e2e.Node
	for _, a := range []netip.Addr{v4, v6} {
		if owner, err = c.WaitL2Owner(ctx, 10*time.Second, a); err != nil {
			t.Fatal(err)
		}
		if err := c.Resolve(ctx, a, owner.MAC, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	owner, err = c.WaitL2Owner(ctx, 10*time.Second, v4)
	if err != nil {
		t.Fatal(err)
	}

	// Another host starts using both addresses (a gratuitous ARP; a
	// solicitation from the IPv6 address, as its kernel sends when it
	// pings from it): conflicts seen in the traffic, the owners still
	// answering.
	other := hostMAC(ctx, t, c.Prober)
	mustRun(ctx, t, c.Prober, "ip", "addr", "add", v4.String()+"/32", "dev", "eth0")
	mustRun(ctx, t, c.Prober, "ip", "-6", "addr", "add", v6.String()+"/64", "dev", "eth0", "nodad")
	mustRun(ctx, t, c.Prober, "arping", "-U", "-c", "1", "-I", "eth0", "-s", v4.String(), v4.String())
	_, _ = c.Prober.Run(ctx, "ping", "-6", "-c", "1", "-W", "1", "-I", v6.String(), e2e.ClientAddr6.String()) // the echo's fate does not matter
	waitRows([]conflictRow{{"Conflict", v4.String(), other, false}, {"Conflict", v6.String(), other, false}}, 15*time.Second)
	if _, err := c.WaitL2Owner(ctx, 5*time.Second, v4); err != nil {
		t.Errorf("owner %s no longer reports answering for %s: %v", owner.Name, v4, err)
	}
	if _, err := c.WaitL2Owner(ctx, 5*time.Second, v6); err != nil {
		t.Errorf("%s no longer answered: %v", v6, err)
	}
}
