package bgp_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/announcer/internal/bgp/bgplab"
	"github.com/beaconlb/beacon/services/announcer/netlab"
)

// TestMain lets the test binary double as the speaker child that bgplab
// starts inside a node's namespace.
func TestMain(m *testing.M) {
	if bgplab.IsChild() {
		os.Exit(bgplab.ChildMain())
	}
	os.Exit(m.Run())
}

var (
	addr   = netip.MustParseAddr
	prefix = netip.MustParsePrefix
)

func community(a, b uint32) uint32 { return a<<16 | b }

// Addresses of the lab hosts: routers .1-.9, nodes .11 and up.
func hostPrefixes(n int) []netip.Prefix {
	return []netip.Prefix{
		netip.PrefixFrom(addr(fmt.Sprintf("192.0.2.%d", n)), 24),
		netip.PrefixFrom(addr(fmt.Sprintf("2001:db8::%d", n)), 64),
	}
}

func addHost(t *testing.T, lab *netlab.Lab, role string, n int) *netlab.Host {
	t.Helper()
	h, err := lab.AddHost(context.Background(), role, hostPrefixes(n)...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func startSpeaker(t *testing.T, node *netlab.Host, opts bgplab.ChildOptions) *bgplab.Speaker {
	t.Helper()
	if !opts.RouterID.IsValid() {
		opts.RouterID = node.Addr4()
	}
	sp, err := bgplab.Start(node, opts)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// requireRouters skips unless running as root with the router binaries.
func requireRouters(t *testing.T, bins ...string) {
	t.Helper()
	netlab.RequireBinaries(t, append([]string{"ip", "tc", "sysctl"}, bins...)...)
}

// wantPath returns a check for netlab.WaitPath comparing the attributes a
// router shows.
func wantPath(nextHop netip.Addr, communities, large []string, localPref uint32) func(netlab.Path) error {
	return func(p netlab.Path) error {
		if p.NextHop != nextHop {
			return fmt.Errorf("next hop %s, want %s", p.NextHop, nextHop)
		}
		if diff := cmp.Diff(communities, p.Communities); diff != "" {
			return fmt.Errorf("communities (-want +got): %s", diff)
		}
		if diff := cmp.Diff(large, p.LargeCommunities); diff != "" {
			return fmt.Errorf("large communities (-want +got): %s", diff)
		}
		if localPref != 0 && p.LocalPref != localPref {
			return fmt.Errorf("local pref %d, want %d", p.LocalPref, localPref)
		}
		return nil
	}
}

// absent fails unless r holds no path for any of the prefixes.
func absent(ctx context.Context, r netlab.Router, prefixes ...netip.Prefix) error {
	rib, err := r.RIB(ctx)
	if err != nil {
		return err
	}
	for _, p := range prefixes {
		if paths := rib[p]; len(paths) > 0 {
			return fmt.Errorf("%s has %v", r.Name(), paths)
		}
	}
	return nil
}
