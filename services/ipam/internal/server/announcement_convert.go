package server

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

func dur(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

func poolNames(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = "pools/" + id
	}
	return out
}

func configName(tenant, collection, id string) string {
	return "tenants/" + tenant + "/" + collection + "/" + id
}

// poolRefs validates "pools/{pool}" references and returns the IDs.
func poolRefs(fes *ipam.FieldErrors, field string, names []string) []string {
	out := make([]string, 0, len(names))
	for i, n := range names {
		if id := parsePoolName(fes, fmt.Sprintf("%s[%d]", field, i), n); id != "" {
			out = append(out, id)
		}
	}
	return out
}

// idRefs validates references to other config objects by ID.
func idRefs(fes *ipam.FieldErrors, field string, ids []string) {
	for i, id := range ids {
		if !validID(id) {
			fes.Add(fmt.Sprintf("%s[%d]", field, i), "%s", idRule)
		}
	}
}

func interfacesOK(fes *ipam.FieldErrors, field string, names []string) {
	for i, n := range names {
		if n == "" || len(n) > 15 || strings.ContainsAny(n, "/ \t\n") {
			fes.Add(fmt.Sprintf("%s[%d]", field, i), "is not an interface name (1-15 characters, no '/' or spaces)")
		}
	}
}

func l2FromProto(fes *ipam.FieldErrors, prefix string, in *ipamv1.L2Advertisement) *ipam.L2Advertisement {
	out := &ipam.L2Advertisement{
		Pools:          poolRefs(fes, prefix+".pools", in.GetPools()),
		PoolSelectors:  selectorsFromProto(fes, prefix+".pool_selectors", in.GetPoolSelectors()),
		NodeSelectors:  selectorsFromProto(fes, prefix+".node_selectors", in.GetNodeSelectors()),
		Interfaces:     in.GetInterfaces(),
		OwnerSelectors: selectorsFromProto(fes, prefix+".owner_selectors", in.GetOwnerSelectors()),
	}
	interfacesOK(fes, prefix+".interfaces", out.Interfaces)
	for i, np := range in.GetNodePriorities() {
		field := fmt.Sprintf("%s.node_priorities[%d]", prefix, i)
		sels := selectorsFromProto(fes, field+".node_selector", []*ipamv1.LabelSelector{np.GetNodeSelector()})
		if np.GetNodeSelector() == nil {
			fes.Add(field+".node_selector", "is required")
			continue
		}
		if np.GetPriority() < 0 {
			fes.Add(field+".priority", "must not be negative")
		}
		if len(sels) == 1 {
			out.NodePriorities = append(out.NodePriorities, ipam.NodePriority{Priority: int(np.GetPriority()), Selector: sels[0]})
		}
	}
	return out
}

func l2ToProto(a *ipam.L2Advertisement, rev int64) *ipamv1.L2Advertisement {
	out := &ipamv1.L2Advertisement{
		Name: configName(a.Tenant, "l2Advertisements", a.ID), Uid: a.UID,
		Pools: poolNames(a.Pools), PoolSelectors: selectorsToProto(a.PoolSelectors),
		NodeSelectors: selectorsToProto(a.NodeSelectors), Interfaces: a.Interfaces,
		OwnerSelectors: selectorsToProto(a.OwnerSelectors),
		Etag:           etag(rev), CreateTime: ts(a.CreateTime), UpdateTime: ts(a.UpdateTime),
	}
	for _, np := range a.NodePriorities {
		out.NodePriorities = append(out.NodePriorities, &ipamv1.NodePriority{Priority: int32(np.Priority), NodeSelector: selectorsToProto([]selector.Selector{np.Selector})[0]})
	}
	return out
}

func bgpAdvFromProto(fes *ipam.FieldErrors, prefix string, in *ipamv1.BGPAdvertisement) *ipam.BGPAdvertisement {
	out := &ipam.BGPAdvertisement{
		Pools:               poolRefs(fes, prefix+".pools", in.GetPools()),
		PoolSelectors:       selectorsFromProto(fes, prefix+".pool_selectors", in.GetPoolSelectors()),
		NodeSelectors:       selectorsFromProto(fes, prefix+".node_selectors", in.GetNodeSelectors()),
		Peers:               in.GetPeers(),
		Communities:         in.GetCommunities(),
		LocalPref:           in.GetLocalPref(),
		AggregationLength:   int(in.GetAggregationLength()),
		AggregationLengthV6: int(in.GetAggregationLengthV6()),
		OwnerSelectors:      selectorsFromProto(fes, prefix+".owner_selectors", in.GetOwnerSelectors()),
	}
	idRefs(fes, prefix+".peers", out.Peers)
	for i, c := range out.Communities {
		if validID(c) {
			continue // an alias, resolved against Community resources
		}
		if p := communityProblem(c); p != "" {
			fes.Add(fmt.Sprintf("%s.communities[%d]", prefix, i), "%s", p)
		}
	}
	if out.AggregationLength == 0 {
		out.AggregationLength = 32
	}
	if out.AggregationLengthV6 == 0 {
		out.AggregationLengthV6 = 128
	}
	if out.AggregationLength < 1 || out.AggregationLength > 32 {
		fes.Add(prefix+".aggregation_length", "must be 1-32")
	}
	if out.AggregationLengthV6 < 1 || out.AggregationLengthV6 > 128 {
		fes.Add(prefix+".aggregation_length_v6", "must be 1-128")
	}
	return out
}

func bgpAdvToProto(a *ipam.BGPAdvertisement, rev int64) *ipamv1.BGPAdvertisement {
	return &ipamv1.BGPAdvertisement{
		Name: configName(a.Tenant, "bgpAdvertisements", a.ID), Uid: a.UID,
		Pools: poolNames(a.Pools), PoolSelectors: selectorsToProto(a.PoolSelectors),
		NodeSelectors: selectorsToProto(a.NodeSelectors), Peers: a.Peers, Communities: a.Communities,
		LocalPref: a.LocalPref, AggregationLength: int32(a.AggregationLength), AggregationLengthV6: int32(a.AggregationLengthV6),
		OwnerSelectors: selectorsToProto(a.OwnerSelectors),
		Etag:           etag(rev), CreateTime: ts(a.CreateTime), UpdateTime: ts(a.UpdateTime),
	}
}

func optionalAddr(fes *ipam.FieldErrors, field, s string) netip.Addr {
	if s == "" {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || a.Is4In6() {
		fes.Add(field, "is not a plain IP address")
		return netip.Addr{}
	}
	return a
}

func peerFromProto(fes *ipam.FieldErrors, prefix string, in *ipamv1.BGPPeer) *ipam.BGPPeer {
	out := &ipam.BGPPeer{
		MyASN: in.GetMyAsn(), PeerASN: in.GetPeerAsn(),
		PeerAddress:   optionalAddr(fes, prefix+".peer_address", in.GetPeerAddress()),
		SourceAddress: optionalAddr(fes, prefix+".source_address", in.GetSourceAddress()),
		RouterID:      optionalAddr(fes, prefix+".router_id", in.GetRouterId()),
		Password:      in.GetPassword(), PasswordFile: in.GetPasswordFile(),
		EBGPMultihop: in.GetEbgpMultihop(), GracefulRestart: in.GetGracefulRestart(),
		NodeSelectors: selectorsFromProto(fes, prefix+".node_selectors", in.GetNodeSelectors()),
		BFDProfile:    in.GetBfdProfile(),
	}
	if out.MyASN == 0 {
		fes.Add(prefix+".my_asn", "is required")
	}
	if out.PeerASN == 0 {
		fes.Add(prefix+".peer_asn", "is required")
	}
	if !out.PeerAddress.IsValid() && in.GetPeerAddress() == "" {
		fes.Add(prefix+".peer_address", "is required")
	}
	if in.GetPeerPort() > 65535 {
		fes.Add(prefix+".peer_port", "must be 0-65535")
	}
	out.PeerPort = uint16(in.GetPeerPort())
	if out.RouterID.IsValid() && !out.RouterID.Is4() {
		fes.Add(prefix+".router_id", "must be an IPv4 address")
	}
	out.HoldTime = durationOK(fes, prefix+".hold_time", in.GetHoldTime(), 0, 65535*time.Second)
	if out.HoldTime > 0 && out.HoldTime < 3*time.Second {
		fes.Add(prefix+".hold_time", "must be 0 (the default) or at least 3s")
	}
	out.KeepaliveTime = durationOK(fes, prefix+".keepalive_time", in.GetKeepaliveTime(), 0, 65535*time.Second)
	hold := out.HoldTime
	if hold == 0 {
		hold = 90 * time.Second
	}
	if out.KeepaliveTime > 0 && out.KeepaliveTime >= hold {
		fes.Add(prefix+".keepalive_time", "must be shorter than the hold time (%s)", hold)
	}
	out.ConnectTime = durationOK(fes, prefix+".connect_time", in.GetConnectTime(), 0, 65535*time.Second)
	if out.Password != "" && out.PasswordFile != "" {
		fes.Add(prefix+".password_file", "give password or password_file, not both")
	}
	if len(out.Password) > 80 {
		fes.Add(prefix+".password", "TCP-MD5 passwords are at most 80 bytes")
	}
	if out.BFDProfile != "" && !validID(out.BFDProfile) {
		fes.Add(prefix+".bfd_profile", "%s", idRule)
	}
	return out
}

func peerToProto(p *ipam.BGPPeer, rev int64, withPassword bool) *ipamv1.BGPPeer {
	out := &ipamv1.BGPPeer{
		Name: configName(p.Tenant, "bgpPeers", p.ID), Uid: p.UID,
		MyAsn: p.MyASN, PeerAsn: p.PeerASN, PeerAddress: addrString(p.PeerAddress), PeerPort: uint32(p.PeerPort),
		SourceAddress: addrString(p.SourceAddress), RouterId: addrString(p.RouterID),
		HoldTime: dur(p.HoldTime), KeepaliveTime: dur(p.KeepaliveTime), ConnectTime: dur(p.ConnectTime),
		PasswordFile: p.PasswordFile, EbgpMultihop: p.EBGPMultihop, GracefulRestart: p.GracefulRestart,
		NodeSelectors: selectorsToProto(p.NodeSelectors), BfdProfile: p.BFDProfile, HasPassword: p.Password != "",
		Etag: etag(rev), CreateTime: ts(p.CreateTime), UpdateTime: ts(p.UpdateTime),
	}
	if withPassword {
		out.Password = p.Password
	}
	return out
}

func bfdFromProto(fes *ipam.FieldErrors, prefix string, in *ipamv1.BFDProfile) *ipam.BFDProfile {
	out := &ipam.BFDProfile{
		ReceiveInterval:  durationOK(fes, prefix+".receive_interval", in.GetReceiveInterval(), 10*time.Millisecond, 60*time.Second),
		TransmitInterval: durationOK(fes, prefix+".transmit_interval", in.GetTransmitInterval(), 10*time.Millisecond, 60*time.Second),
		DetectMultiplier: in.GetDetectMultiplier(),
		EchoMode:         in.GetEchoMode(),
		EchoInterval:     durationOK(fes, prefix+".echo_interval", in.GetEchoInterval(), 10*time.Millisecond, 60*time.Second),
		PassiveMode:      in.GetPassiveMode(),
		MinimumTTL:       in.GetMinimumTtl(),
	}
	if out.ReceiveInterval == 0 {
		out.ReceiveInterval = 300 * time.Millisecond
	}
	if out.TransmitInterval == 0 {
		out.TransmitInterval = 300 * time.Millisecond
	}
	if out.DetectMultiplier == 0 {
		out.DetectMultiplier = 3
	}
	if out.DetectMultiplier < 2 || out.DetectMultiplier > 255 {
		fes.Add(prefix+".detect_multiplier", "must be 2-255")
	}
	if out.MinimumTTL > 254 {
		fes.Add(prefix+".minimum_ttl", "must be 0-254")
	}
	return out
}

func bfdToProto(b *ipam.BFDProfile, rev int64) *ipamv1.BFDProfile {
	return &ipamv1.BFDProfile{
		Name: configName(b.Tenant, "bfdProfiles", b.ID), Uid: b.UID,
		ReceiveInterval: dur(b.ReceiveInterval), TransmitInterval: dur(b.TransmitInterval),
		DetectMultiplier: b.DetectMultiplier, EchoMode: b.EchoMode, EchoInterval: dur(b.EchoInterval),
		PassiveMode: b.PassiveMode, MinimumTtl: b.MinimumTTL,
		Etag: etag(rev), CreateTime: ts(b.CreateTime), UpdateTime: ts(b.UpdateTime),
	}
}

func communityFromProto(fes *ipam.FieldErrors, prefix string, in *ipamv1.Community) *ipam.Community {
	out := &ipam.Community{}
	for i, a := range in.GetAliases() {
		field := fmt.Sprintf("%s.aliases[%d]", prefix, i)
		if !validID(a.GetName()) {
			fes.Add(field+".name", "%s", idRule)
		}
		if p := communityProblem(a.GetValue()); p != "" {
			fes.Add(field+".value", "%s", p)
		}
		if slices.ContainsFunc(out.Aliases, func(o ipam.CommunityAlias) bool { return o.Name == a.GetName() }) {
			fes.Add(field+".name", "repeats %q", a.GetName())
		}
		out.Aliases = append(out.Aliases, ipam.CommunityAlias{Name: a.GetName(), Value: a.GetValue()})
	}
	return out
}

func communityToProto(c *ipam.Community, rev int64) *ipamv1.Community {
	out := &ipamv1.Community{
		Name: configName(c.Tenant, "communities", c.ID), Uid: c.UID,
		Etag: etag(rev), CreateTime: ts(c.CreateTime), UpdateTime: ts(c.UpdateTime),
	}
	for _, a := range c.Aliases {
		out.Aliases = append(out.Aliases, &ipamv1.CommunityAlias{Name: a.Name, Value: a.Value})
	}
	return out
}

func nodeFromProto(fes *ipam.FieldErrors, prefix string, in *ipamv1.Node) *ipam.ClusterNode {
	labelsOK(fes, prefix+".labels", in.GetLabels())
	return &ipam.ClusterNode{Labels: in.GetLabels()}
}

func nodeToProto(n *ipam.ClusterNode, rev int64) *ipamv1.Node {
	return &ipamv1.Node{
		Name: configName(n.Tenant, "nodes", n.ID), Uid: n.UID, Labels: n.Labels,
		Etag: etag(rev), CreateTime: ts(n.CreateTime), UpdateTime: ts(n.UpdateTime),
	}
}
