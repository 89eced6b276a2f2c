package reconcile

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/announcer/internal/ipamclient"
	"github.com/beaconlb/beacon/services/announcer/internal/links"
)

func TestL2Desired(t *testing.T) {
	v4, v6 := netip.MustParseAddr("192.0.2.100"), netip.MustParseAddr("2001:db8::100")
	itfs := []links.Interface{
		{Name: "eth0", Up: true, Addrs: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24")}},
		{Name: "eth1", Up: true}, // no IPv4 address: NDP only
		{Name: "eth2", Up: false, Addrs: []netip.Prefix{netip.MustParsePrefix("198.51.100.1/24")}},
	}
	plan := &ipamclient.Plan{L2: map[netip.Addr][]string{v4: nil, v6: {"eth1", "eth2"}}}
	cmpAddr := cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
	want := map[string][]netip.Addr{"eth0": {v4}, "eth1": {v6}}
	if diff := cmp.Diff(want, L2Desired(plan, itfs, false), cmpAddr); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][]netip.Addr{}, L2Desired(plan, itfs, true), cmpAddr); diff != "" {
		t.Errorf("lost node still answers: %s", diff)
	}
}
