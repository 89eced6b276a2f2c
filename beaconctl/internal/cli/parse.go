package cli

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// parseLabels reads KEY=VALUE pairs; a later pair overrides an earlier one.
func parseLabels(flag string, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s %q: want KEY=VALUE", flag, kv)
		}
		m[k] = v
	}
	return m, nil
}

// applyLabelEdits applies KEY=VALUE (set) and KEY- (remove) edits to a copy
// of labels.
func applyLabelEdits(flag string, labels map[string]string, edits []string) (map[string]string, error) {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	for _, e := range edits {
		if k, v, ok := strings.Cut(e, "="); ok {
			if k == "" {
				return nil, fmt.Errorf("--%s %q: want KEY=VALUE or KEY-", flag, e)
			}
			out[k] = v
			continue
		}
		k, ok := strings.CutSuffix(e, "-")
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s %q: want KEY=VALUE or KEY-", flag, e)
		}
		delete(out, k)
	}
	return out, nil
}

// parseFamily reads ipv4 or ipv6 (also IPv4, 4, v4 and the like).
func parseFamily(s string) (ipamv1.IPFamily, error) {
	switch strings.ToLower(s) {
	case "ipv4", "v4", "4", "inet":
		return ipamv1.IPFamily_IP_FAMILY_IPV4, nil
	case "ipv6", "v6", "6", "inet6":
		return ipamv1.IPFamily_IP_FAMILY_IPV6, nil
	}
	return 0, fmt.Errorf("--family %q: want ipv4 or ipv6", s)
}

// parseDualStack reads require or prefer.
func parseDualStack(s string) (ipamv1.IPFamilyPolicy, error) {
	switch strings.ToLower(s) {
	case "require", "required":
		return ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_REQUIRE_DUAL_STACK, nil
	case "prefer", "preferred":
		return ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_PREFER_DUAL_STACK, nil
	}
	return 0, fmt.Errorf("--dual-stack %q: want require or prefer", s)
}

// parsePort reads PORT[/PROTOCOL], the protocol tcp (the default), udp or sctp.
func parsePort(s string) (*ipamv1.Port, error) {
	num, proto, hasProto := strings.Cut(s, "/")
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("--port %q: want PORT[/PROTOCOL] with PORT 1-65535", s)
	}
	p := &ipamv1.Port{Port: int32(n), Protocol: ipamv1.Protocol_PROTOCOL_TCP}
	if hasProto {
		switch strings.ToLower(proto) {
		case "tcp":
		case "udp":
			p.Protocol = ipamv1.Protocol_PROTOCOL_UDP
		case "sctp":
			p.Protocol = ipamv1.Protocol_PROTOCOL_SCTP
		default:
			return nil, fmt.Errorf("--port %q: protocol must be tcp, udp or sctp", s)
		}
	}
	return p, nil
}

// rangeKey is a canonical form of a range for comparing what the user typed
// with what the server returned: "2001:DB8::/64" and "2001:db8::/64" are the
// same range. Text that does not parse is compared as it is.
func rangeKey(s string) string {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.String()
	}
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		a, errA := netip.ParseAddr(strings.TrimSpace(lo))
		b, errB := netip.ParseAddr(strings.TrimSpace(hi))
		if errA == nil && errB == nil {
			return a.String() + "-" + b.String()
		}
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.String()
	}
	return s
}

// editRanges adds and removes ranges. Adding a range already present changes
// nothing; removing one that is absent is an error, so a typo cannot pass
// for success.
func editRanges(current, add, remove []string) ([]string, error) {
	out := slices.Clone(current)
	for _, r := range remove {
		i := slices.IndexFunc(out, func(c string) bool { return rangeKey(c) == rangeKey(r) })
		if i < 0 {
			return nil, fmt.Errorf("--remove-range %s: the pool has no such range (it has %s)", r, strings.Join(current, ", "))
		}
		out = slices.Delete(out, i, i+1)
	}
	for _, r := range add {
		if !slices.ContainsFunc(out, func(c string) bool { return rangeKey(c) == rangeKey(r) }) {
			out = append(out, r)
		}
	}
	return out, nil
}
