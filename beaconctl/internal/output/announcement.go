package output

import (
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// all stands for an empty list that means "every one": every pool, node,
// interface or peer.
const all = "*"

// Defaults the API documents for fields left unset, shown in tables so that
// a cell says what takes effect.
const (
	defaultAggregationLength   = 32
	defaultAggregationLengthV6 = 128
	defaultBFDInterval         = 300 * time.Millisecond
	defaultBFDMultiplier       = 3
	defaultBGPPort             = 179
)

// Selector renders a label selector the way Kubernetes writes one, in
// braces: {app=web,zone in (a,b),!legacy}. Labels come in key order, then
// the expressions in their order. The empty selector, which matches
// everything, is {}.
func Selector(s *ipamv1.LabelSelector) string {
	ml := s.GetMatchLabels()
	parts := make([]string, 0, len(ml)+len(s.GetMatchExpressions()))
	for _, k := range slices.Sorted(maps.Keys(ml)) {
		parts = append(parts, k+"="+ml[k])
	}
	for _, e := range s.GetMatchExpressions() {
		vals := "(" + strings.Join(e.GetValues(), ",") + ")"
		switch e.GetOperator() {
		case ipamv1.LabelSelectorRequirement_OPERATOR_IN:
			parts = append(parts, e.GetKey()+" in "+vals)
		case ipamv1.LabelSelectorRequirement_OPERATOR_NOT_IN:
			parts = append(parts, e.GetKey()+" notin "+vals)
		case ipamv1.LabelSelectorRequirement_OPERATOR_EXISTS:
			parts = append(parts, e.GetKey())
		case ipamv1.LabelSelectorRequirement_OPERATOR_DOES_NOT_EXIST:
			parts = append(parts, "!"+e.GetKey())
		default:
			parts = append(parts, e.GetKey()+" "+e.GetOperator().String()+" "+vals)
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Selectors renders selectors with Selector, separated by commas; "" for
// none.
func Selectors(sels []*ipamv1.LabelSelector) string {
	out := make([]string, len(sels))
	for i, s := range sels {
		out[i] = Selector(s)
	}
	return strings.Join(out, ",")
}

// orAll returns s, or "*" when s is empty because the list it renders is
// empty and that means every one.
func orAll(s string) string {
	if s == "" {
		return all
	}
	return s
}

// Conditions renders the conditions that do not hold: their reasons (their
// types when they give no reason), separated by commas; "" when every
// condition holds or there are none.
func Conditions(conds []*ipamv1.Condition) string {
	var out []string
	for _, c := range conds {
		if c.GetStatus() {
			continue
		}
		r := c.GetReason()
		if r == "" {
			r = c.GetType() + "=False"
		}
		out = append(out, r)
	}
	return strings.Join(out, ",")
}

// poolsCell is the POOLS cell of an advertisement: its pools and pool
// selectors, or "*" when it has neither and so announces every pool.
func poolsCell(pools []string, sels []*ipamv1.LabelSelector) string {
	cells := slices.Clone(pools)
	if s := Selectors(sels); s != "" {
		cells = append(cells, s)
	}
	return orAll(strings.Join(cells, ","))
}

// L2AdvertisementTable writes L2 advertisements as a table: NAME POOLS
// NODE-SELECTORS INTERFACES PRIORITIES CONDITIONS. "*" stands for every
// pool, node or interface; PRIORITIES lists PRIORITY:{SELECTOR} tiers and
// CONDITIONS the reasons of the conditions that do not hold.
func L2AdvertisementTable(w io.Writer, ads []*ipamv1.L2Advertisement) error {
	rows := make([][]string, 0, len(ads))
	for _, a := range ads {
		prios := make([]string, 0, len(a.GetNodePriorities()))
		for _, p := range a.GetNodePriorities() {
			prios = append(prios, fmt.Sprintf("%d:%s", p.GetPriority(), Selector(p.GetNodeSelector())))
		}
		rows = append(rows, []string{
			a.GetName(),
			poolsCell(a.GetPools(), a.GetPoolSelectors()),
			orAll(Selectors(a.GetNodeSelectors())),
			orAll(strings.Join(a.GetInterfaces(), ",")),
			strings.Join(prios, ","),
			Conditions(a.GetConditions()),
		})
	}
	return writeRows(w, []string{"NAME", "POOLS", "NODE-SELECTORS", "INTERFACES", "PRIORITIES", "CONDITIONS"}, rows)
}

// BGPAdvertisementTable writes BGP advertisements as a table: NAME POOLS
// PEERS COMMUNITIES LOCAL-PREF AGG CONDITIONS. "*" stands for every pool or
// peer; AGG is the IPv4/IPv6 aggregation length.
func BGPAdvertisementTable(w io.Writer, ads []*ipamv1.BGPAdvertisement) error {
	rows := make([][]string, 0, len(ads))
	for _, a := range ads {
		localPref := ""
		if lp := a.GetLocalPref(); lp != 0 {
			localPref = strconv.FormatUint(uint64(lp), 10)
		}
		agg4, agg6 := a.GetAggregationLength(), a.GetAggregationLengthV6()
		if agg4 == 0 {
			agg4 = defaultAggregationLength
		}
		if agg6 == 0 {
			agg6 = defaultAggregationLengthV6
		}
		rows = append(rows, []string{
			a.GetName(),
			poolsCell(a.GetPools(), a.GetPoolSelectors()),
			orAll(strings.Join(a.GetPeers(), ",")),
			strings.Join(a.GetCommunities(), ","),
			localPref,
			fmt.Sprintf("%d/%d", agg4, agg6),
			Conditions(a.GetConditions()),
		})
	}
	return writeRows(w, []string{"NAME", "POOLS", "PEERS", "COMMUNITIES", "LOCAL-PREF", "AGG", "CONDITIONS"}, rows)
}

// PeerAddress is a peer's address, with its port when that is not BGP's
// 179: "192.0.2.1", "192.0.2.1:1179", "[2001:db8::1]:1179".
func PeerAddress(p *ipamv1.BGPPeer) string {
	port := p.GetPeerPort()
	if p.GetPeerAddress() == "" || port == 0 || port == defaultBGPPort {
		return p.GetPeerAddress()
	}
	return net.JoinHostPort(p.GetPeerAddress(), strconv.FormatUint(uint64(port), 10))
}

// BGPPeerTable writes BGP peers as a table: NAME MY-ASN PEER-ASN ADDRESS BFD
// NODE-SELECTORS CONDITIONS. BFD is the BFD profile; "*" in NODE-SELECTORS
// stands for every node.
func BGPPeerTable(w io.Writer, peers []*ipamv1.BGPPeer) error {
	rows := make([][]string, 0, len(peers))
	for _, p := range peers {
		rows = append(rows, []string{
			p.GetName(),
			asn(p.GetMyAsn()),
			asn(p.GetPeerAsn()),
			PeerAddress(p),
			p.GetBfdProfile(),
			orAll(Selectors(p.GetNodeSelectors())),
			Conditions(p.GetConditions()),
		})
	}
	return writeRows(w, []string{"NAME", "MY-ASN", "PEER-ASN", "ADDRESS", "BFD", "NODE-SELECTORS", "CONDITIONS"}, rows)
}

func asn(n uint32) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(n), 10)
}

// BFDProfileTable writes BFD profiles as a table: NAME RX TX MULT, the
// receive and transmit intervals and the detect multiplier. Unset values
// show the defaults that apply (300ms, 300ms, 3).
func BFDProfileTable(w io.Writer, profiles []*ipamv1.BFDProfile) error {
	rows := make([][]string, 0, len(profiles))
	for _, p := range profiles {
		mult := p.GetDetectMultiplier()
		if mult == 0 {
			mult = defaultBFDMultiplier
		}
		rows = append(rows, []string{
			p.GetName(),
			durationOr(p.GetReceiveInterval(), defaultBFDInterval),
			durationOr(p.GetTransmitInterval(), defaultBFDInterval),
			strconv.FormatUint(uint64(mult), 10),
		})
	}
	return writeRows(w, []string{"NAME", "RX", "TX", "MULT"}, rows)
}

func durationOr(d *durationpb.Duration, def time.Duration) string {
	if d == nil || d.AsDuration() == 0 {
		return def.String()
	}
	return d.AsDuration().String()
}

// CommunityTable writes community alias sets as a table: NAME ALIASES, the
// aliases as NAME=VALUE separated by commas.
func CommunityTable(w io.Writer, comms []*ipamv1.Community) error {
	rows := make([][]string, 0, len(comms))
	for _, c := range comms {
		aliases := make([]string, 0, len(c.GetAliases()))
		for _, a := range c.GetAliases() {
			aliases = append(aliases, a.GetName()+"="+a.GetValue())
		}
		rows = append(rows, []string{c.GetName(), strings.Join(aliases, ",")})
	}
	return writeRows(w, []string{"NAME", "ALIASES"}, rows)
}

// NodeTable writes nodes as a table: NAME LABELS, the labels as KEY=VALUE
// in key order, separated by commas.
func NodeTable(w io.Writer, nodes []*ipamv1.Node) error {
	rows := make([][]string, 0, len(nodes))
	for _, n := range nodes {
		labels := n.GetLabels()
		kv := make([]string, 0, len(labels))
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			kv = append(kv, k+"="+labels[k])
		}
		rows = append(rows, []string{n.GetName(), strings.Join(kv, ",")})
	}
	return writeRows(w, []string{"NAME", "LABELS"}, rows)
}
