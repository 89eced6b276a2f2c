// Package request turns what a Kubernetes Service says about its load
// balancer (type, class, annotations, spec fields) into an IPAM allocation
// request. It is plain Go: internal/kube copies the fields it needs out of the
// Service into a Service value, so the rules here are tested without an API
// server and without client-go.
//
// Only internal/kube imports this package.
package request

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/beaconlb/beacon/k8s-adapter/internal/reason"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// Annotation prefixes, most preferred first. Each carries the same keys
// (LoadBalancerIPs, AddressPool, AllowSharedIP); the last one is MetalLB's
// deprecated prefix and draws a warning.
const (
	PrefixBeacon     = "beacon.io/"
	PrefixMetalLB    = "metallb.io/"
	PrefixDeprecated = "metallb.universe.tf/"
)

// Annotation keys, without their prefix.
const (
	LoadBalancerIPs = "loadBalancerIPs"
	AddressPool     = "address-pool"
	AllowSharedIP   = "allow-shared-ip"
)

// Global address annotations (beacon.io/ only: MetalLB has no such thing).
const (
	// GlobalGroupAnnotation joins the Service to a global group, by
	// "POOL/GROUP", by its resource name "pools/POOL/globalGroups/GROUP",
	// or by "GROUP" with the address-pool annotation naming the pool: the
	// Service gets the group's address, shared with the other clusters'
	// members.
	GlobalGroupAnnotation = PrefixBeacon + "global-group"
	// GlobalRoleAnnotation is "active" (the default) or "backup": a backup
	// member's nodes announce the address less preferred.
	GlobalRoleAnnotation = PrefixBeacon + "global-role"
)

// AddressCountAnnotation asks for several addresses per family, 1 to 16
// (beacon.io/ only): each is answered for over L2 by a distinct node
// (active-active L2), and the Service's status lists them all. Not with
// requested addresses, allow-shared-ip or a global group.
const AddressCountAnnotation = PrefixBeacon + "address-count"

// maxAddressCount bounds AddressCountAnnotation, as the IPAM does.
const maxAddressCount = 16

// IsGlobal reports whether the Service asks to join a global group: its
// endpoint nodes then matter whatever its external traffic policy (a
// cluster with none withdraws the address).
func IsGlobal(annotations map[string]string) bool {
	_, ok := annotations[GlobalGroupAnnotation]
	return ok
}

// PoolAnnotation is the annotation the adapter writes on a Service: the IPAM
// pool its addresses came from.
const PoolAnnotation = PrefixBeacon + "ip-allocated-from-pool"

// MetalLBPoolAnnotation is the annotation MetalLB writes on a Service: the
// name of the IPAddressPool its addresses came from. The adapter writes it
// too, for tools that read it: the IPAddressPool's name for a pool imported
// from MetalLB, else the IPAM pool ID.
const MetalLBPoolAnnotation = PrefixDeprecated + "ip-allocated-from-pool"

// TenantAnnotation is the annotation the adapter writes on a Service it
// allocates for: its tenant. With it, adapters of two tenants (two classes)
// in one cluster each take back only their own finalizer and status.
const TenantAnnotation = PrefixBeacon + "tenant"

// Port is a port a Service serves.
type Port struct {
	Port     int32
	Protocol string // "TCP", "UDP", "SCTP"; empty means TCP
}

// Service is the part of a Kubernetes Service that decides its allocation.
type Service struct {
	Namespace, Name, UID string
	Labels               map[string]string
	Annotations          map[string]string
	// Type is spec.type ("LoadBalancer", "ClusterIP", ...).
	Type string
	// Class is spec.loadBalancerClass; empty when unset.
	Class string
	// LoadBalancerIP is the deprecated spec.loadBalancerIP.
	LoadBalancerIP string
	// IPFamilies is spec.ipFamilies ("IPv4", "IPv6"), primary first.
	IPFamilies []string
	// IPFamilyPolicy is spec.ipFamilyPolicy ("SingleStack", "PreferDualStack",
	// "RequireDualStack"); empty means SingleStack.
	IPFamilyPolicy string
	// ExternalTrafficPolicy is spec.externalTrafficPolicy ("Cluster", "Local").
	ExternalTrafficPolicy string
	Ports                 []Port
	// Deleting is set once the Service has a deletion timestamp.
	Deleting bool
}

// Owner is the Service's owner key in the IPAM: "namespace/name".
func (s *Service) Owner() string { return s.Namespace + "/" + s.Name }

// Filter says which Services the adapter handles.
type Filter struct {
	// Class is the spec.loadBalancerClass the adapter answers to.
	Class string
	// AlsoUnclassed also takes Services with no class, as MetalLB does.
	AlsoUnclassed bool
}

// Wants reports whether the adapter should hold an allocation for s: a
// LoadBalancer Service of its class that is not being deleted.
func (f Filter) Wants(s *Service) bool {
	if s.Deleting || s.Type != "LoadBalancer" {
		return false
	}
	if s.Class == "" {
		return f.AlsoUnclassed
	}
	return s.Class == f.Class
}

// Options are the cluster-wide inputs of Build.
type Options struct {
	// NamespaceLabels are the labels of the Service's namespace.
	NamespaceLabels map[string]string
	// EndpointNodes are the nodes with ready endpoints; used only when the
	// Service's external traffic policy is Local or it joins a global
	// group.
	EndpointNodes []string
	// MetalLBPool maps the name of a MetalLB IPAddressPool to its IPAM pool
	// ID. Pool names under metallb.io/ prefixes go through it; names under
	// beacon.io/ are IPAM pool IDs already. Nil: names are taken as they are.
	MetalLBPool func(name string) string
}

// Warning is something worth telling the Service's owner that does not stop
// the allocation.
type Warning struct {
	Reason  string // CamelCase, for an Event
	Message string
}

// Error is a Service whose request cannot be built; nothing should be
// allocated until it is fixed.
type Error struct {
	Reason  string // CamelCase, for an Event
	Message string
}

func (e *Error) Error() string { return e.Message }

// Build returns the allocation a Service asks for (owner, owner_uid,
// namespace, labels, families, requested addresses and pool, sharing key,
// ports, traffic policy, endpoint nodes) and warnings about how it asked.
func Build(s *Service, o Options) (*ipamv1.Allocation, []Warning, error) {
	var warns []Warning
	lookup := func(key string) (string, bool) {
		var val, from string
		found := false
		for _, p := range []string{PrefixBeacon, PrefixMetalLB, PrefixDeprecated} {
			v, ok := s.Annotations[p+key]
			if !ok {
				continue
			}
			if p == PrefixDeprecated {
				warns = append(warns, Warning{Reason: reason.DeprecatedAnnotation, Message: fmt.Sprintf("annotation %s%s is deprecated; use %s%s or %s%s", p, key, PrefixMetalLB, key, PrefixBeacon, key)})
			}
			if !found {
				val, from, found = v, p, true
				continue
			}
			if v != val {
				warns = append(warns, Warning{Reason: reason.ConflictingAnnotations, Message: fmt.Sprintf("annotations %s%s=%q and %s%s=%q disagree; using %s%s", from, key, val, p, key, v, from, key)})
			}
		}
		if found && from != PrefixBeacon && key == AddressPool && o.MetalLBPool != nil && strings.TrimSpace(val) != "" {
			val = o.MetalLBPool(strings.TrimSpace(val))
		}
		return val, found
	}

	a := &ipamv1.Allocation{
		Owner:           s.Owner(),
		OwnerUid:        s.UID,
		Namespace:       s.Namespace,
		OwnerLabels:     cloneLabels(s.Labels),
		NamespaceLabels: cloneLabels(o.NamespaceLabels),
	}
	for _, f := range s.IPFamilies {
		switch f {
		case "IPv4":
			a.IpFamilies = append(a.IpFamilies, ipamv1.IPFamily_IP_FAMILY_IPV4)
		case "IPv6":
			a.IpFamilies = append(a.IpFamilies, ipamv1.IPFamily_IP_FAMILY_IPV6)
		default:
			return nil, warns, &Error{Reason: reason.InvalidService, Message: fmt.Sprintf("spec.ipFamilies: unknown family %q", f)}
		}
	}
	switch s.IPFamilyPolicy {
	case "", "SingleStack":
		a.IpFamilyPolicy = ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_SINGLE_STACK
		if len(a.IpFamilies) > 1 {
			a.IpFamilies = a.IpFamilies[:1]
		}
	case "PreferDualStack":
		a.IpFamilyPolicy = ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_PREFER_DUAL_STACK
	case "RequireDualStack":
		a.IpFamilyPolicy = ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_REQUIRE_DUAL_STACK
	default:
		return nil, warns, &Error{Reason: reason.InvalidService, Message: fmt.Sprintf("spec.ipFamilyPolicy: unknown policy %q", s.IPFamilyPolicy)}
	}

	ips, hasIPs := lookup(LoadBalancerIPs)
	if s.LoadBalancerIP != "" && hasIPs {
		return nil, warns, &Error{Reason: reason.InvalidAnnotation, Message: "spec.loadBalancerIP and the loadBalancerIPs annotation cannot both be set"}
	}
	if s.LoadBalancerIP != "" {
		ips = s.LoadBalancerIP
	}
	addrs, err := parseAddrs(ips)
	if err != nil {
		return nil, warns, err
	}
	for _, addr := range addrs {
		a.RequestedAddresses = append(a.RequestedAddresses, addr.String())
	}
	if len(addrs) > 0 {
		if err := checkFamilies(addrs, a); err != nil {
			return nil, warns, err
		}
	}
	if pool, ok := lookup(AddressPool); ok {
		pool = strings.TrimSpace(pool)
		if pool == "" {
			return nil, warns, &Error{Reason: reason.InvalidAnnotation, Message: "the address-pool annotation is empty"}
		}
		a.RequestedPool = "pools/" + pool
	}
	if key, ok := lookup(AllowSharedIP); ok {
		a.SharingKey = key
	}

	seen := map[Port]bool{}
	for _, p := range s.Ports {
		if p.Protocol == "" {
			p.Protocol = "TCP"
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		proto, ok := protocols[p.Protocol]
		if !ok {
			return nil, warns, &Error{Reason: reason.InvalidService, Message: fmt.Sprintf("port %d: unknown protocol %q", p.Port, p.Protocol)}
		}
		a.Ports = append(a.Ports, &ipamv1.Port{Port: p.Port, Protocol: proto})
	}
	slices.SortFunc(a.Ports, func(x, y *ipamv1.Port) int {
		return cmp.Or(cmp.Compare(x.GetPort(), y.GetPort()), cmp.Compare(x.GetProtocol(), y.GetProtocol()))
	})

	if err := global(s, a); err != nil {
		return nil, warns, err
	}
	if err := addressCount(s, a); err != nil {
		return nil, warns, err
	}
	a.TrafficPolicy = ipamv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER
	if s.ExternalTrafficPolicy == "Local" {
		a.TrafficPolicy = ipamv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
	}
	if s.ExternalTrafficPolicy == "Local" || a.GetGlobalGroup() != "" {
		a.EndpointNodes = slices.Sorted(slices.Values(o.EndpointNodes))
		a.EndpointNodes = slices.Compact(a.EndpointNodes)
	}
	return a, warns, nil
}

var protocols = map[string]ipamv1.Protocol{
	"TCP":  ipamv1.Protocol_PROTOCOL_TCP,
	"UDP":  ipamv1.Protocol_PROTOCOL_UDP,
	"SCTP": ipamv1.Protocol_PROTOCOL_SCTP,
}

// parseAddrs parses a comma-separated list of at most one address per
// family.
func parseAddrs(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		addr, err := netip.ParseAddr(f)
		if err != nil || addr.Zone() != "" {
			return nil, &Error{Reason: reason.InvalidAnnotation, Message: fmt.Sprintf("requested address %q is not an IP address", f)}
		}
		addr = addr.Unmap()
		if slices.ContainsFunc(out, func(o netip.Addr) bool { return o.Is4() == addr.Is4() }) {
			return nil, &Error{Reason: reason.InvalidAnnotation, Message: fmt.Sprintf("requested addresses %q: at most one address per family", s)}
		}
		out = append(out, addr)
	}
	return out, nil
}

// checkFamilies refuses requested addresses that do not fit the Service's
// families and policy, as MetalLB does.
func checkFamilies(addrs []netip.Addr, a *ipamv1.Allocation) error {
	fams := map[ipamv1.IPFamily]bool{}
	for _, f := range a.IpFamilies {
		fams[f] = true
	}
	for _, addr := range addrs {
		f := ipamv1.IPFamily_IP_FAMILY_IPV6
		if addr.Is4() {
			f = ipamv1.IPFamily_IP_FAMILY_IPV4
		}
		if len(fams) > 0 && !fams[f] {
			return &Error{Reason: reason.InvalidAnnotation, Message: fmt.Sprintf("requested address %s is not of the Service's ipFamilies %v", addr, familyNames(a.IpFamilies))}
		}
	}
	if a.IpFamilyPolicy == ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_REQUIRE_DUAL_STACK && len(addrs) != 2 {
		return &Error{Reason: reason.InvalidAnnotation, Message: "ipFamilyPolicy RequireDualStack with requested addresses needs one IPv4 and one IPv6 address"}
	}
	if a.IpFamilyPolicy == ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_SINGLE_STACK && len(addrs) > 1 {
		return &Error{Reason: reason.InvalidAnnotation, Message: "ipFamilyPolicy SingleStack takes one requested address"}
	}
	return nil
}

func familyNames(fs []ipamv1.IPFamily) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = map[ipamv1.IPFamily]string{ipamv1.IPFamily_IP_FAMILY_IPV4: "IPv4", ipamv1.IPFamily_IP_FAMILY_IPV6: "IPv6"}[f]
	}
	return out
}

func cloneLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

// ReleaseHoldAnnotation sets how long a Service's addresses are kept for it
// after it is deleted (a Go duration, "10m"; "0s": free at once). It is the
// way to opt in to holds for a Service managed through MetalLB, whose
// addresses are otherwise free at once as in MetalLB.
const ReleaseHoldAnnotation = PrefixBeacon + "release-hold"

// ReleaseHold returns the Service's release-hold annotation: nil if unset.
func ReleaseHold(annotations map[string]string) (*time.Duration, error) {
	v, ok := annotations[ReleaseHoldAnnotation]
	if !ok {
		return nil, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < 0 {
		return nil, &Error{Reason: reason.InvalidAnnotation, Message: fmt.Sprintf("annotation %s=%q is not a duration such as 10m or 0s", ReleaseHoldAnnotation, v)}
	}
	return &d, nil
}

// UsesMetalLB reports whether a Service is managed through MetalLB's
// annotations (metallb.io/ or metallb.universe.tf/, other than the pool
// annotation the adapter writes itself).
func UsesMetalLB(annotations map[string]string) bool {
	for k := range annotations {
		if k == MetalLBPoolAnnotation {
			continue
		}
		if strings.HasPrefix(k, PrefixMetalLB) || strings.HasPrefix(k, PrefixDeprecated) {
			return true
		}
	}
	return false
}

// global sets a's global group and role from the Service's annotations.
func global(s *Service, a *ipamv1.Allocation) error {
	name, ok := s.Annotations[GlobalGroupAnnotation]
	if !ok {
		if _, role := s.Annotations[GlobalRoleAnnotation]; role {
			return &Error{Reason: reason.InvalidAnnotation, Message: "the " + GlobalRoleAnnotation + " annotation needs " + GlobalGroupAnnotation}
		}
		return nil
	}
	name = strings.TrimSpace(name)
	bad := &Error{Reason: reason.InvalidAnnotation, Message: fmt.Sprintf("the %s annotation %q must be POOL/GROUP, pools/POOL/globalGroups/GROUP, or GROUP with the address-pool annotation", GlobalGroupAnnotation, name)}
	switch parts := strings.Split(name, "/"); {
	case len(parts) == 4 && parts[0] == "pools" && parts[2] == "globalGroups" && parts[1] != "" && parts[3] != "":
		a.GlobalGroup = name
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		a.GlobalGroup = "pools/" + parts[0] + "/globalGroups/" + parts[1]
	case len(parts) == 1 && parts[0] != "" && a.GetRequestedPool() != "":
		a.GlobalGroup = a.GetRequestedPool() + "/globalGroups/" + parts[0]
	default:
		return bad
	}
	if len(a.GetRequestedAddresses()) > 0 {
		return &Error{Reason: reason.InvalidAnnotation, Message: "a global group decides its address: drop loadBalancerIPs (or spec.loadBalancerIP) from a Service with " + GlobalGroupAnnotation}
	}
	if a.GetSharingKey() != "" {
		return &Error{Reason: reason.InvalidAnnotation, Message: "a global group's address is not shared with allow-shared-ip: drop it from a Service with " + GlobalGroupAnnotation}
	}
	switch role := strings.TrimSpace(s.Annotations[GlobalRoleAnnotation]); role {
	case "", "active":
		a.GlobalRole = ipamv1.GlobalRole_GLOBAL_ROLE_ACTIVE
	case "backup":
		a.GlobalRole = ipamv1.GlobalRole_GLOBAL_ROLE_BACKUP
	default:
		return &Error{Reason: reason.InvalidAnnotation, Message: fmt.Sprintf("the %s annotation %q must be active or backup", GlobalRoleAnnotation, role)}
	}
	return nil
}

// addressCount reads AddressCountAnnotation into a.
func addressCount(s *Service, a *ipamv1.Allocation) error {
	v, ok := s.Annotations[AddressCountAnnotation]
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > maxAddressCount {
		return &Error{Reason: reason.InvalidAnnotation, Message: fmt.Sprintf("annotation %s=%q: want a number of addresses per family from 1 to %d", AddressCountAnnotation, v, maxAddressCount)}
	}
	if n == 1 {
		return nil
	}
	switch {
	case len(a.GetRequestedAddresses()) > 0:
		return &Error{Reason: reason.InvalidAnnotation, Message: fmt.Sprintf("annotation %s cannot be used with requested addresses (the pool's lowest free addresses are given)", AddressCountAnnotation)}
	case a.GetSharingKey() != "":
		return &Error{Reason: reason.InvalidAnnotation, Message: fmt.Sprintf("annotation %s cannot be used with allow-shared-ip (several addresses are spread over nodes, not shared)", AddressCountAnnotation)}
	case a.GetGlobalGroup() != "":
		return &Error{Reason: reason.InvalidAnnotation, Message: fmt.Sprintf("annotation %s cannot be used with %s (a global group has one address per family)", AddressCountAnnotation, GlobalGroupAnnotation)}
	}
	a.AddressCount = int32(n)
	return nil
}
