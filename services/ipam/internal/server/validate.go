package server

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/addrspace"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// Limits on request fields.
const (
	maxRanges        = 256
	maxTenants       = 256
	maxSelectors     = 32
	maxLabels        = 512
	maxPorts         = 256
	maxEndpointNodes = 10000
	maxDescription   = 1024
	minTTL           = 10 * time.Second
	maxTTL           = 365 * 24 * time.Hour
	maxHold          = 30 * 24 * time.Hour
)

// parseRanges parses a list of ranges, reporting each bad one by index.
func parseRanges(fes *ipam.FieldErrors, field string, in []string, required bool) []addrspace.Range {
	if required && len(in) == 0 {
		fes.Add(field, "at least one range is required")
	}
	if len(in) > maxRanges {
		fes.Add(field, "at most %d entries", maxRanges)
		return nil
	}
	out := make([]addrspace.Range, 0, len(in))
	for i, s := range in {
		r, err := addrspace.ParseRange(s)
		if err != nil {
			fes.Add(fmt.Sprintf("%s[%d]", field, i), "%s", reasonOf(err))
			continue
		}
		out = append(out, r)
	}
	return out
}

// reasonOf returns the part of a parse error worth showing.
func reasonOf(err error) string {
	var pe *addrspace.ParseError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	return err.Error()
}

func labelsOK(fes *ipam.FieldErrors, field string, labels map[string]string) {
	if len(labels) > maxLabels {
		fes.Add(field, "at most %d labels", maxLabels)
		return
	}
	if err := selector.ValidateLabels(labels); err != nil {
		var fe *selector.FieldError
		if errors.As(err, &fe) {
			fes.Add(field+strings.TrimPrefix(fe.Field, "labels"), "%s", fe.Reason)
			return
		}
		fes.Add(field, "%s", err.Error())
	}
}

func selectorsFromProto(fes *ipam.FieldErrors, field string, in []*ipamv1.LabelSelector) []selector.Selector {
	if len(in) > maxSelectors {
		fes.Add(field, "at most %d selectors", maxSelectors)
		return nil
	}
	var out []selector.Selector
	for i, ps := range in {
		s := selector.Selector{MatchLabels: ps.GetMatchLabels()}
		for _, r := range ps.GetMatchExpressions() {
			s.Expressions = append(s.Expressions, selector.Requirement{Key: r.GetKey(), Operator: selector.Operator(r.GetOperator()), Values: r.GetValues()})
		}
		if err := s.Validate(); err != nil {
			var fe *selector.FieldError
			if errors.As(err, &fe) {
				fes.Add(fmt.Sprintf("%s[%d].%s", field, i, fe.Field), "%s", fe.Reason)
			} else {
				fes.Add(fmt.Sprintf("%s[%d]", field, i), "%s", err.Error())
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

func tenantsOK(fes *ipam.FieldErrors, field string, ts []string) {
	if len(ts) > maxTenants {
		fes.Add(field, "at most %d tenants", maxTenants)
		return
	}
	for i, t := range ts {
		if !validTenant(t) {
			fes.Add(fmt.Sprintf("%s[%d]", field, i), "is not a tenant ID: 1-63 lower-case letters, digits and '-'")
		} else if slices.Index(ts, t) != i {
			fes.Add(fmt.Sprintf("%s[%d]", field, i), "repeats %q", t)
		}
	}
}

func namespaceOK(fes *ipam.FieldErrors, field, ns string) {
	if ns != "" && !validTenant(ns) {
		fes.Add(field, "is not a namespace name: 1-63 lower-case letters, digits and '-'")
	}
}

// poolFromProto validates a pool's fields (prefix: the field path of the
// pool in the request) and converts them. id is the pool's ID.
func poolFromProto(fes *ipam.FieldErrors, prefix, id string, in *ipamv1.Pool) *ipam.Pool {
	if in == nil {
		fes.Add(prefix, "is required")
		return nil
	}
	p := &ipam.Pool{
		Name:          id,
		Description:   in.GetDescription(),
		AutoAssign:    in.AutoAssign == nil || in.GetAutoAssign(),
		AvoidBuggyIPs: in.GetAvoidBuggyIps(),
		Tenants:       in.GetTenants(),
		Labels:        in.GetLabels(),
	}
	if len(p.Description) > maxDescription {
		fes.Add(prefix+".description", "must be at most %d bytes", maxDescription)
	}
	p.Ranges = parseRanges(fes, prefix+".ranges", in.GetRanges(), true)
	for i, r := range p.Ranges {
		if b, ok := addrspace.ReservedIn(r); ok {
			fes.Add(fmt.Sprintf("%s.ranges[%d]", prefix, i), "reaches into %s (%s addresses), which no pool may hand out", b.Prefix, b.Name)
		}
	}
	if n := addrspace.Blocks24(p.Ranges); p.AvoidBuggyIPs && n > addrspace.MaxBuggyBlocks {
		fes.Add(prefix+".avoid_buggy_ips", "the IPv4 ranges span %d /24 blocks; avoid_buggy_ips allows at most %d (a /8), each a fragment kept in memory", n, addrspace.MaxBuggyBlocks)
	}
	for i := range p.Ranges {
		for j := range i {
			if p.Ranges[i].Overlaps(p.Ranges[j]) {
				fes.Add(fmt.Sprintf("%s.ranges[%d]", prefix, i), "overlaps ranges[%d]", j)
			}
		}
	}
	p.Exclusions = parseRanges(fes, prefix+".exclusions", in.GetExclusions(), false)
	tenantsOK(fes, prefix+".tenants", p.Tenants)
	labelsOK(fes, prefix+".labels", p.Labels)
	if pol := in.GetAllocationPolicy(); pol != nil {
		p.Policy = &ipam.Policy{Priority: int(pol.GetPriority()), Namespaces: pol.GetNamespaces()}
		if pol.GetPriority() < 0 {
			fes.Add(prefix+".allocation_policy.priority", "must not be negative")
		}
		for i, ns := range pol.GetNamespaces() {
			namespaceOK(fes, fmt.Sprintf("%s.allocation_policy.namespaces[%d]", prefix, i), ns)
		}
		p.Policy.NamespaceSelectors = selectorsFromProto(fes, prefix+".allocation_policy.namespace_selectors", pol.GetNamespaceSelectors())
		p.Policy.OwnerSelectors = selectorsFromProto(fes, prefix+".allocation_policy.owner_selectors", pol.GetOwnerSelectors())
	}
	return p
}

// durationOK checks an optional duration against bounds; 0 when unset.
func durationOK(fes *ipam.FieldErrors, field string, d *durationpb.Duration, lo, hi time.Duration) time.Duration {
	if d == nil {
		return 0
	}
	if err := d.CheckValid(); err != nil {
		fes.Add(field, "is not a valid duration")
		return 0
	}
	v := d.AsDuration()
	if v < lo || v > hi {
		fes.Add(field, "must be between %s and %s", lo, hi)
		return 0
	}
	return v
}

// allocationFromProto validates the request fields of an allocation.
func allocationFromProto(fes *ipam.FieldErrors, tenant string, in *ipamv1.Allocation) *ipam.Allocation {
	if in == nil {
		fes.Add("allocation", "is required")
		return nil
	}
	a := &ipam.Allocation{
		Tenant:          tenant,
		Owner:           in.GetOwner(),
		OwnerUID:        in.GetOwnerUid(),
		Namespace:       in.GetNamespace(),
		OwnerLabels:     selector.SetOf(in.GetOwnerLabels()),
		NamespaceLabels: selector.SetOf(in.GetNamespaceLabels()),
		SharingKey:      in.GetSharingKey(),
		EndpointNodes:   in.GetEndpointNodes(),
	}
	printable(fes, "allocation.owner", a.Owner, 253, true)
	printable(fes, "allocation.owner_uid", a.OwnerUID, 128, false)
	printable(fes, "allocation.sharing_key", a.SharingKey, 253, false)
	namespaceOK(fes, "allocation.namespace", a.Namespace)
	labelsOK(fes, "allocation.owner_labels", in.GetOwnerLabels())
	labelsOK(fes, "allocation.namespace_labels", in.GetNamespaceLabels())
	if len(in.GetIpFamilies()) > 2 {
		fes.Add("allocation.ip_families", "at most 2 families")
	}
	for i, f := range in.GetIpFamilies() {
		var fam ipam.Family
		switch f {
		case ipamv1.IPFamily_IP_FAMILY_IPV4:
			fam = ipam.IPv4
		case ipamv1.IPFamily_IP_FAMILY_IPV6:
			fam = ipam.IPv6
		default:
			fes.Add(fmt.Sprintf("allocation.ip_families[%d]", i), "must be IP_FAMILY_IPV4 or IP_FAMILY_IPV6")
			continue
		}
		if slices.Contains(a.Families, fam) {
			fes.Add(fmt.Sprintf("allocation.ip_families[%d]", i), "repeats %s", fam)
			continue
		}
		a.Families = append(a.Families, fam)
	}
	switch in.GetIpFamilyPolicy() {
	case ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_UNSPECIFIED, ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_SINGLE_STACK:
		a.FamilyPolicy = ipam.SingleStack
		if len(a.Families) > 1 {
			fes.Add("allocation.ip_families", "single-stack takes one family; set ip_family_policy for dual-stack")
		}
	case ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_PREFER_DUAL_STACK:
		a.FamilyPolicy = ipam.PreferDualStack
	case ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_REQUIRE_DUAL_STACK:
		a.FamilyPolicy = ipam.RequireDualStack
	default:
		fes.Add("allocation.ip_family_policy", "is not a known policy")
	}
	if len(in.GetRequestedAddresses()) > 2 {
		fes.Add("allocation.requested_addresses", "at most one address per family")
	}
	for i, s := range in.GetRequestedAddresses() {
		field := fmt.Sprintf("allocation.requested_addresses[%d]", i)
		addr, err := netip.ParseAddr(s)
		switch {
		case err != nil:
			fes.Add(field, "is not an IP address")
		case addr.Zone() != "" || addr.Is4In6():
			fes.Add(field, "must be a plain IPv4 or IPv6 address, without zone or IPv4-mapped form")
		case slices.ContainsFunc(a.RequestedAddrs, func(o netip.Addr) bool { return o.Is4() == addr.Is4() }):
			fes.Add(field, "at most one address per family")
		default:
			a.RequestedAddrs = append(a.RequestedAddrs, addr)
		}
	}
	if rp := in.GetRequestedPool(); rp != "" {
		a.RequestedPool = parsePoolName(fes, "allocation.requested_pool", rp)
	}
	if len(in.GetPorts()) > maxPorts {
		fes.Add("allocation.ports", "at most %d ports", maxPorts)
	}
	for i, p := range in.GetPorts() {
		field := fmt.Sprintf("allocation.ports[%d]", i)
		if p.GetPort() < 1 || p.GetPort() > 65535 {
			fes.Add(field+".port", "must be 1-65535")
			continue
		}
		proto := ipam.TCP
		switch p.GetProtocol() {
		case ipamv1.Protocol_PROTOCOL_UNSPECIFIED, ipamv1.Protocol_PROTOCOL_TCP:
		case ipamv1.Protocol_PROTOCOL_UDP:
			proto = ipam.UDP
		case ipamv1.Protocol_PROTOCOL_SCTP:
			proto = ipam.SCTP
		default:
			fes.Add(field+".protocol", "is not a known protocol")
			continue
		}
		port := ipam.Port{Number: uint16(p.GetPort()), Protocol: proto}
		if slices.Contains(a.Ports, port) {
			fes.Add(field, "repeats port %d", p.GetPort())
			continue
		}
		a.Ports = append(a.Ports, port)
	}
	switch in.GetTrafficPolicy() {
	case ipamv1.TrafficPolicy_TRAFFIC_POLICY_UNSPECIFIED, ipamv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER:
		a.TrafficPolicy = ipam.TrafficCluster
	case ipamv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL:
		a.TrafficPolicy = ipam.TrafficLocal
	default:
		fes.Add("allocation.traffic_policy", "is not a known policy")
	}
	if len(a.EndpointNodes) > maxEndpointNodes {
		fes.Add("allocation.endpoint_nodes", "at most %d nodes", maxEndpointNodes)
	} else {
		for i, n := range a.EndpointNodes {
			printable(fes, fmt.Sprintf("allocation.endpoint_nodes[%d]", i), n, 253, true)
		}
	}
	a.TTL = durationOK(fes, "allocation.ttl", in.GetTtl(), minTTL, maxTTL)
	if gg := in.GetGlobalGroup(); gg != "" {
		a.GlobalGroup = parseGroupName(fes, "allocation.global_group", gg)
		if a.SharingKey != "" {
			fes.Add("allocation.sharing_key", "must be empty with global_group (the group's members share its address)")
		}
		if len(a.RequestedAddrs) > 0 {
			fes.Add("allocation.requested_addresses", "must be empty with global_group (the group decides its address)")
		}
	}
	addressCount(fes, in, a)
	switch in.GetGlobalRole() {
	case ipamv1.GlobalRole_GLOBAL_ROLE_UNSPECIFIED, ipamv1.GlobalRole_GLOBAL_ROLE_ACTIVE:
	case ipamv1.GlobalRole_GLOBAL_ROLE_BACKUP:
		a.GlobalBackup = true
	default:
		fes.Add("allocation.global_role", "is not a known role")
	}
	return a
}

// maxAddressCount bounds Allocation.address_count.
const maxAddressCount = 16

// addressCount validates address_count into a: 0 and 1 are one address
// per family; several are the allocation's own, so they refuse the fields
// that would share them or pin them.
func addressCount(fes *ipam.FieldErrors, in *ipamv1.Allocation, a *ipam.Allocation) {
	n := in.GetAddressCount()
	switch {
	case n < 0 || n > maxAddressCount:
		fes.Add("allocation.address_count", "must be 0-%d", maxAddressCount)
		return
	case n <= 1:
		return
	}
	a.AddressCount = int(n)
	if in.GetSharingKey() != "" {
		fes.Add("allocation.sharing_key", "must be empty with address_count above 1 (several addresses are spread over nodes, not shared)")
	}
	if in.GetGlobalGroup() != "" {
		fes.Add("allocation.global_group", "must be empty with address_count above 1 (a global group has one address per family)")
	}
	if len(in.GetRequestedAddresses()) > 0 {
		fes.Add("allocation.requested_addresses", "must be empty with address_count above 1 (the pool's lowest free addresses are given)")
	}
}
