package server

import (
	"net/netip"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/addrspace"
	"github.com/beaconlb/beacon/services/ipam/internal/index"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func familyToProto(f ipam.Family) ipamv1.IPFamily {
	if f == ipam.IPv6 {
		return ipamv1.IPFamily_IP_FAMILY_IPV6
	}
	return ipamv1.IPFamily_IP_FAMILY_IPV4
}

func rangesToProto(rs []addrspace.Range) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

func addrsToProto(as []netip.Addr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

func selectorsToProto(ss []selector.Selector) []*ipamv1.LabelSelector {
	var out []*ipamv1.LabelSelector
	for _, s := range ss {
		ps := &ipamv1.LabelSelector{MatchLabels: s.MatchLabels}
		for _, r := range s.Expressions {
			ps.MatchExpressions = append(ps.MatchExpressions, &ipamv1.LabelSelectorRequirement{
				Key: r.Key, Operator: ipamv1.LabelSelectorRequirement_Operator(r.Operator), Values: r.Values,
			})
		}
		out = append(out, ps)
	}
	return out
}

// poolToProto renders a pool with its usage.
func poolToProto(p *ipam.Pool, rev int64, usage []index.Usage) *ipamv1.Pool {
	auto := p.AutoAssign
	out := &ipamv1.Pool{
		Name:          "pools/" + p.Name,
		Uid:           p.UID,
		Description:   p.Description,
		Ranges:        rangesToProto(p.Ranges),
		Exclusions:    rangesToProto(p.Exclusions),
		AutoAssign:    &auto,
		AvoidBuggyIps: p.AvoidBuggyIPs,
		Tenants:       p.Tenants,
		Labels:        p.Labels,
		Etag:          etag(rev),
		CreateTime:    ts(p.CreateTime),
		UpdateTime:    ts(p.UpdateTime),
		Status:        &ipamv1.PoolStatus{},
	}
	if p.Policy != nil {
		out.AllocationPolicy = &ipamv1.AllocationPolicy{
			Priority:           int32(p.Policy.Priority),
			Namespaces:         p.Policy.Namespaces,
			NamespaceSelectors: selectorsToProto(p.Policy.NamespaceSelectors),
			OwnerSelectors:     selectorsToProto(p.Policy.OwnerSelectors),
		}
	}
	for _, u := range usage {
		out.Status.Families = append(out.Status.Families, &ipamv1.FamilyUsage{
			Family: familyToProto(u.Family), Size: u.Size.String(), Used: u.Used, Free: u.Free.String(),
		})
	}
	return out
}

// allocationToProto renders an allocation.
func allocationToProto(a *ipam.Allocation, rev int64) *ipamv1.Allocation {
	out := &ipamv1.Allocation{
		Name:               allocationName(a),
		Uid:                a.UID,
		Owner:              a.Owner,
		OwnerUid:           a.OwnerUID,
		Namespace:          a.Namespace,
		OwnerLabels:        a.OwnerLabels.Map(),
		NamespaceLabels:    a.NamespaceLabels.Map(),
		IpFamilyPolicy:     ipamv1.IPFamilyPolicy(a.FamilyPolicy + 1),
		RequestedAddresses: addrsToProto(a.RequestedAddrs),
		SharingKey:         a.SharingKey,
		TrafficPolicy:      ipamv1.TrafficPolicy(a.TrafficPolicy + 1),
		EndpointNodes:      a.EndpointNodes,
		Addresses:          addrsToProto(a.Addrs),
		Pool:               "pools/" + a.Pool,
		ExpireTime:         ts(a.ExpireTime),
		Etag:               etag(rev),
		CreateTime:         ts(a.CreateTime),
		UpdateTime:         ts(a.UpdateTime),
	}
	if a.AddressCount > 1 {
		out.AddressCount = int32(a.AddressCount)
	}
	if a.RequestedPool != "" {
		out.RequestedPool = "pools/" + a.RequestedPool
	}
	for _, f := range a.Families {
		out.IpFamilies = append(out.IpFamilies, familyToProto(f))
	}
	for _, p := range a.Ports {
		out.Ports = append(out.Ports, &ipamv1.Port{Port: int32(p.Number), Protocol: ipamv1.Protocol(p.Protocol + 1)})
	}
	if a.TTL > 0 {
		out.Ttl = durationpb.New(a.TTL)
	}
	if a.GlobalGroup != "" {
		out.GlobalGroup = ipam.GroupName(a.GlobalGroup)
		out.GlobalRole = ipamv1.GlobalRole_GLOBAL_ROLE_ACTIVE
		if a.GlobalBackup {
			out.GlobalRole = ipamv1.GlobalRole_GLOBAL_ROLE_BACKUP
		}
	}
	return out
}

// auditToProto renders an audit record.
func auditToProto(r *ipam.AuditRecord) *ipamv1.AuditRecord {
	return &ipamv1.AuditRecord{
		Name:       "tenants/" + r.Tenant + "/auditRecords/" + r.ID,
		Time:       ts(r.Time),
		Action:     ipamv1.AuditRecord_Action(r.Action),
		Actor:      r.Actor,
		Allocation: "tenants/" + r.Tenant + "/allocations/" + r.Allocation,
		Owner:      r.Owner,
		Addresses:  addrsToProto(r.Addrs),
		Pool:       "pools/" + r.Pool,
		RequestId:  r.RequestID,
	}
}
