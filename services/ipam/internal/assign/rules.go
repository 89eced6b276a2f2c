package assign

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// PolicyMatches reports whether an owner matches a pool's policy: every
// criterion that is set must hold (MetalLB serviceAllocation).
func PolicyMatches(p *ipam.Policy, a *ipam.Allocation) bool {
	if p == nil {
		return true
	}
	if len(p.Namespaces) > 0 && !slices.Contains(p.Namespaces, a.Namespace) {
		return false
	}
	if len(p.NamespaceSelectors) > 0 && !selector.AnyMatchesSet(p.NamespaceSelectors, a.NamespaceLabels) {
		return false
	}
	if len(p.OwnerSelectors) > 0 && !selector.AnyMatchesSet(p.OwnerSelectors, a.OwnerLabels) {
		return false
	}
	return true
}

// CandidatePools returns, in the order to try them, the pools an allocation
// may draw from when it names none: pools with auto_assign whose tenants and
// policy admit it; first those with a policy, by priority (1 first, unset
// last), then those without a policy; ties by name. A pool being deleted is
// never a candidate.
func CandidatePools(pools []*ipam.Pool, a *ipam.Allocation) []*ipam.Pool {
	var out []*ipam.Pool
	for _, p := range pools {
		if p.Deleting || !p.AutoAssign || !p.AllowsTenant(a.Tenant) || !PolicyMatches(p.Policy, a) {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(x, y *ipam.Pool) int {
		if c := poolRank(x) - poolRank(y); c != 0 {
			if c < 0 {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Name, y.Name)
	})
	return out
}

// poolRank orders pools: set priorities first (lowest number first), then
// policies with no priority, then pools without a policy.
func poolRank(p *ipam.Pool) int {
	switch {
	case p.Policy == nil:
		return 1 << 31
	case p.Policy.Priority <= 0:
		return 1<<31 - 1
	default:
		return p.Policy.Priority
	}
}

// FamilyChoices returns the family combinations to try for an allocation, in
// order: each combination is the list of families one allocation receives,
// primary first. hasFamily says which families the pool offers.
func FamilyChoices(a *ipam.Allocation, hasFamily func(ipam.Family) bool) [][]ipam.Family {
	primary := []ipam.Family{ipam.IPv4, ipam.IPv6}
	if len(a.Families) > 0 {
		primary = a.Families
	}
	both := []ipam.Family{primary[0], other(primary[0])}
	var out [][]ipam.Family
	add := func(fs []ipam.Family) {
		for _, f := range fs {
			if !hasFamily(f) {
				return
			}
		}
		out = append(out, fs)
	}
	switch a.FamilyPolicy {
	case ipam.RequireDualStack:
		add(both)
	case ipam.PreferDualStack:
		add(both)
		add(both[:1])
		if len(a.Families) == 0 {
			add(both[1:])
		}
	default:
		if len(a.Families) > 0 {
			add(primary[:1])
		} else {
			add([]ipam.Family{ipam.IPv4})
			add([]ipam.Family{ipam.IPv6})
		}
	}
	return out
}

func other(f ipam.Family) ipam.Family {
	if f == ipam.IPv4 {
		return ipam.IPv6
	}
	return ipam.IPv4
}

// Satisfies reports whether an owner's existing allocation answers a new
// request for the same owner, so that Allocate can return it unchanged.
func Satisfies(existing, req *ipam.Allocation) bool {
	if req.GlobalGroup != existing.GlobalGroup {
		return false
	}
	if req.RequestedPool != "" && req.RequestedPool != existing.Pool {
		return false
	}
	for _, want := range req.RequestedAddrs {
		if !slices.Contains(existing.Addrs, want) {
			return false
		}
	}
	has := func(f ipam.Family) bool {
		return slices.ContainsFunc(existing.Addrs, func(a netip.Addr) bool { return ipam.FamilyOf(a) == f })
	}
	if len(req.Families) > 0 && !has(req.Families[0]) {
		return false
	}
	if req.FamilyPolicy == ipam.RequireDualStack && (!has(ipam.IPv4) || !has(ipam.IPv6)) {
		return false
	}
	if req.FamilyPolicy == ipam.SingleStack && has(ipam.IPv4) && has(ipam.IPv6) && len(req.RequestedAddrs) < 2 {
		return false
	}
	return existing.Count() == req.Count()
}

// PortsClash reports whether two owners' ports collide: the same port and
// protocol, or either owner declaring no ports at all (it may use any).
func PortsClash(a, b []ipam.Port) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// CanShare reports whether allocation a may join the holders of claim c:
// same tenant and sharing key, and no port clash with any holder
// (MetalLB's allow-shared-ip).
func CanShare(c *ipam.Claim, a *ipam.Allocation) bool {
	if a.GlobalGroup != "" || c.Group != "" {
		// A global group's members of different tenants share its
		// addresses whatever their ports (they serve in different
		// clusters); nothing else shares them.
		return a.GlobalGroup != "" && c.Group == a.GlobalGroup && len(c.Holders) > 0
	}
	if a.SharingKey == "" || c.SharingKey != a.SharingKey || c.Tenant != a.Tenant || len(c.Holders) == 0 {
		return false
	}
	for _, h := range c.Holders {
		if h.Allocation == a.ID {
			continue
		}
		if PortsClash(h.Ports, a.Ports) {
			return false
		}
	}
	return true
}
