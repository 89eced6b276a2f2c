package cli

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

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

// parseSelector reads KEY=VALUE[,KEY=VALUE...] into a label selector whose
// match_labels are those pairs.
func parseSelector(flag, s string) (*ipamv1.LabelSelector, error) {
	sel := &ipamv1.LabelSelector{MatchLabels: map[string]string{}}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s %q: want KEY=VALUE[,KEY=VALUE...]", flag, s)
		}
		if _, dup := sel.MatchLabels[k]; dup {
			return nil, fmt.Errorf("--%s %q: label %s given twice", flag, s, k)
		}
		sel.MatchLabels[k] = strings.TrimSpace(v)
	}
	return sel, nil
}

// parseSelectors reads one selector per value of a repeatable selector
// flag. A single empty value stands for no selectors, so that an update
// can clear the list.
func parseSelectors(flag string, vals []string) ([]*ipamv1.LabelSelector, error) {
	if len(vals) == 1 && vals[0] == "" {
		return nil, nil
	}
	out := make([]*ipamv1.LabelSelector, 0, len(vals))
	for _, v := range vals {
		sel, err := parseSelector(flag, v)
		if err != nil {
			return nil, err
		}
		out = append(out, sel)
	}
	return out, nil
}

// parseNodePriorities reads PRIORITY:KEY=VALUE[,KEY=VALUE...] tiers; a
// single empty value stands for none. "PRIORITY:" alone selects every node.
func parseNodePriorities(flag string, vals []string) ([]*ipamv1.NodePriority, error) {
	if len(vals) == 1 && vals[0] == "" {
		return nil, nil
	}
	out := make([]*ipamv1.NodePriority, 0, len(vals))
	for _, v := range vals {
		prio, sel, ok := strings.Cut(v, ":")
		n, err := strconv.ParseInt(strings.TrimSpace(prio), 10, 32)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("--%s %q: want PRIORITY:KEY=VALUE[,KEY=VALUE...] with PRIORITY 0 or more", flag, v)
		}
		np := &ipamv1.NodePriority{Priority: int32(n), NodeSelector: &ipamv1.LabelSelector{}}
		if sel != "" {
			if np.NodeSelector, err = parseSelector(flag, sel); err != nil {
				return nil, err
			}
		}
		out = append(out, np)
	}
	return out, nil
}

// editAliases applies NAME=VALUE (set, in place or appended) and, when
// removals are allowed, NAME- (remove) edits to a copy of aliases.
func editAliases(flag string, aliases []*ipamv1.CommunityAlias, edits []string, removals bool) ([]*ipamv1.CommunityAlias, error) {
	out := make([]*ipamv1.CommunityAlias, 0, len(aliases)+len(edits))
	for _, a := range aliases {
		out = append(out, &ipamv1.CommunityAlias{Name: a.GetName(), Value: a.GetValue()})
	}
	for _, e := range edits {
		if name, value, ok := strings.Cut(e, "="); ok && name != "" && value != "" {
			if i := slices.IndexFunc(out, func(a *ipamv1.CommunityAlias) bool { return a.GetName() == name }); i >= 0 {
				out[i].Value = value
			} else {
				out = append(out, &ipamv1.CommunityAlias{Name: name, Value: value})
			}
			continue
		}
		name, ok := strings.CutSuffix(e, "-")
		if !removals || !ok || name == "" || strings.Contains(name, "=") {
			if removals {
				return nil, fmt.Errorf("--%s %q: want NAME=VALUE or NAME-", flag, e)
			}
			return nil, fmt.Errorf("--%s %q: want NAME=VALUE", flag, e)
		}
		out = slices.DeleteFunc(out, func(a *ipamv1.CommunityAlias) bool { return a.GetName() == name })
	}
	return out, nil
}

// parseTrafficPolicy reads cluster or local.
func parseTrafficPolicy(s string) (ipamv1.TrafficPolicy, error) {
	switch strings.ToLower(s) {
	case "cluster":
		return ipamv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER, nil
	case "local":
		return ipamv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL, nil
	}
	return 0, fmt.Errorf("--traffic-policy %q: want cluster or local", s)
}

// optionalDuration is d as a protobuf duration, nil for 0 (the server's
// default); negative durations are refused.
func optionalDuration(flag string, d time.Duration) (*durationpb.Duration, error) {
	switch {
	case d < 0:
		return nil, fmt.Errorf("--%s must not be negative", flag)
	case d == 0:
		return nil, nil
	}
	return durationpb.New(d), nil
}
