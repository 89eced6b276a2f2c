package reconcile

import (
	"net/netip"
	"slices"

	"github.com/beaconlb/beacon/services/announcer/internal/ipamclient"
	"github.com/beaconlb/beacon/services/announcer/internal/links"
)

// usable reports whether the responder can answer family f on an
// interface: it is up, and for IPv4 it has an IPv4 address (ARP needs one
// to send from).
func usable(itf links.Interface, is4 bool) bool {
	if !itf.Up {
		return false
	}
	if !is4 {
		return true
	}
	return slices.ContainsFunc(itf.Addrs, func(p netip.Prefix) bool { return p.Addr().Is4() })
}

// L2Desired maps a plan's L2 addresses to the interfaces that answer for
// them: the plan's interfaces for the address (all interfaces when it names
// none) that exist and can answer its family. lost means the node is cut off
// from the IPAM past its grace period: it answers for nothing.
func L2Desired(plan *ipamclient.Plan, itfs []links.Interface, lost bool) map[string][]netip.Addr {
	out := map[string][]netip.Addr{}
	if plan == nil || lost {
		return out
	}
	for addr, names := range plan.L2 {
		for _, itf := range itfs {
			if len(names) > 0 && !slices.Contains(names, itf.Name) {
				continue
			}
			if usable(itf, addr.Is4()) {
				out[itf.Name] = append(out[itf.Name], addr)
			}
		}
	}
	for name := range out {
		slices.SortFunc(out[name], func(a, b netip.Addr) int { return a.Compare(b) })
	}
	return out
}
