package l2

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/bpf"
)

// This file is pure: it decides what to answer to one received frame and
// builds the frames to send. It does no I/O.

const (
	ethHeaderLen  = 14
	ipv6HeaderLen = 40
	protoICMPv6   = 58
	icmpTypeNS    = 135
	icmpTypeNA    = 136
	ndpHopLimit   = 255
	// maxFrame is the read buffer size: larger than any Ethernet frame at a
	// standard MTU; a solicitation is under 100 bytes.
	maxFrame = 2048
)

// verdict is what became of one received frame.
type verdict int

const (
	answered         verdict = iota // a reply was built
	dropMalformed                   // not parseable as the expected protocol
	dropOwnFrame                    // sent by this interface (packet sockets see their own output)
	dropNotRequest                  // an ARP reply, or another ICMPv6 message
	dropEthernetDest                // not sent to us: neither our MAC nor broadcast/multicast
	dropInvalid                     // fails RFC 826/4861 validity checks (hop limit, checksum, addresses)
	dropNotAnswered                 // a valid request for an address we do not answer for here
	claimed                         // another host says it has an address we answer for here
)

func (v verdict) String() string {
	switch v {
	case answered:
		return "answered"
	case dropMalformed:
		return "malformed"
	case dropOwnFrame:
		return "own frame"
	case dropNotRequest:
		return "not a request"
	case dropEthernetDest:
		return "not addressed to us"
	case dropInvalid:
		return "invalid"
	case dropNotAnswered:
		return "not answered here"
	case claimed:
		return "claimed by another host"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// isRequest reports whether the frame was a valid request from someone else,
// which Stats counts whether or not it was answered.
func (v verdict) isRequest() bool { return v == answered || v == dropNotAnswered }

// ethAllNodes is the Ethernet multicast address of ff02::1.
func ethAllNodes() net.HardwareAddr { return net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1} }

// ipv6AllNodes is the link-local all-nodes group, ff02::1.
func ipv6AllNodes() netip.Addr { return netip.AddrFrom16([16]byte{0: 0xff, 1: 0x02, 15: 0x01}) }

// arpFilter passes ARP requests and replies (replies, to see other hosts
// claim our addresses).
func arpFilter() ([]bpf.RawInstruction, error) {
	return bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 2}, // EtherType
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(ethernet.EtherTypeARP), SkipTrue: 4},
		bpf.LoadAbsolute{Off: ethHeaderLen + 6, Size: 2}, // ARP operation
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(arp.OperationRequest), SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(arp.OperationReply), SkipTrue: 1},
		bpf.RetConstant{Val: maxFrame},
		bpf.RetConstant{Val: 0},
	})
}

// nsFilter passes IPv6 packets whose next header is ICMPv6 and whose ICMPv6
// type is neighbor solicitation or advertisement (advertisements, to see
// other hosts claim our addresses). (Neither carries extension headers.)
func nsFilter() ([]bpf.RawInstruction, error) {
	return bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 2}, // EtherType
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(ethernet.EtherTypeIPv6), SkipTrue: 6},
		bpf.LoadAbsolute{Off: ethHeaderLen + 6, Size: 1}, // next header
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: protoICMPv6, SkipTrue: 4},
		bpf.LoadAbsolute{Off: ethHeaderLen + ipv6HeaderLen, Size: 1}, // ICMPv6 type
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: icmpTypeNS, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: icmpTypeNA, SkipTrue: 1},
		bpf.RetConstant{Val: maxFrame},
		bpf.RetConstant{Val: 0},
	})
}

// answerARP decides on one received frame and, when it is an ARP request
// for an address answers accepts, builds the reply. target is the requested
// address when the frame was a request. A reply or a gratuitous request from
// another host whose sender address is one answers accepts is a claim on it
// (verdict claimed, target the address): RFC 5227's conflict, which the
// caller defends.
func answerARP(frame []byte, mac net.HardwareAddr, answers func(netip.Addr) bool) (reply []byte, target netip.Addr, v verdict) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(frame); err != nil || f.EtherType != ethernet.EtherTypeARP {
		return nil, target, dropMalformed
	}
	if bytes.Equal(f.Source, mac) {
		return nil, target, dropOwnFrame
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		return nil, target, dropMalformed
	}
	if p.HardwareType != 1 || p.ProtocolType != uint16(ethernet.EtherTypeIPv4) ||
		p.HardwareAddrLength != 6 || p.IPLength != 4 {
		return nil, target, dropMalformed
	}
	if bytes.Equal(p.SenderHardwareAddr, mac) {
		return nil, target, dropOwnFrame
	}
	if s := p.SenderIP; s.IsValid() && !s.IsUnspecified() && answers(s) {
		return nil, s, claimed
	}
	if p.Operation != arp.OperationRequest {
		return nil, target, dropNotRequest
	}
	if !bytes.Equal(f.Destination, ethernet.Broadcast) && !bytes.Equal(f.Destination, mac) {
		return nil, target, dropEthernetDest
	}
	target = p.TargetIP
	if !target.IsValid() || target.IsUnspecified() || target.IsMulticast() || isBroadcast4(target) {
		return nil, target, dropInvalid
	}
	if !answers(target) {
		return nil, target, dropNotAnswered
	}
	// Reply to the requester; a probe (sender 0.0.0.0, RFC 5227) gets the
	// same unicast reply, which is what Linux does for its own addresses.
	out, err := arpFrame(arp.OperationReply, mac, target, p.SenderHardwareAddr, p.SenderIP, p.SenderHardwareAddr)
	if err != nil {
		return nil, target, dropMalformed
	}
	return out, target, answered
}

// gratuitousARP builds the two announcements MetalLB sends for an address,
// both broadcast: a request (sender and target address both addr, target
// hardware zero, RFC 5227 section 3) and a reply whose target hardware
// address equals the sender's (Linux treats a reply as gratuitous only then,
// and a gratuitous one bypasses the neighbour locktime).
func gratuitousARP(mac net.HardwareAddr, addr netip.Addr) ([][]byte, error) {
	req, err := arpFrame(arp.OperationRequest, mac, addr, make(net.HardwareAddr, 6), addr, ethernet.Broadcast)
	if err != nil {
		return nil, err
	}
	rep, err := arpFrame(arp.OperationReply, mac, addr, mac, addr, ethernet.Broadcast)
	if err != nil {
		return nil, err
	}
	return [][]byte{req, rep}, nil
}

func arpFrame(op arp.Operation, mac net.HardwareAddr, sender netip.Addr, targetHW net.HardwareAddr, target netip.Addr, ethDst net.HardwareAddr) ([]byte, error) {
	p, err := arp.NewPacket(op, mac, sender, targetHW, target)
	if err != nil {
		return nil, fmt.Errorf("build ARP %s for %s: %w", op, sender, err)
	}
	pb, err := p.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("marshal ARP %s for %s: %w", op, sender, err)
	}
	f := ethernet.Frame{Destination: ethDst, Source: mac, EtherType: ethernet.EtherTypeARP, Payload: pb}
	b, err := f.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("marshal Ethernet frame for %s: %w", sender, err)
	}
	return b, nil
}

func isBroadcast4(a netip.Addr) bool { return a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) }

// ipv6Packet is the part of an IPv6-in-Ethernet frame answerNS needs.
type ipv6Packet struct {
	ethSrc, ethDst net.HardwareAddr
	src, dst       netip.Addr
	hopLimit       uint8
	icmp           []byte
}

func parseIPv6(frame []byte) (ipv6Packet, bool) {
	if len(frame) < ethHeaderLen+ipv6HeaderLen ||
		binary.BigEndian.Uint16(frame[12:14]) != uint16(ethernet.EtherTypeIPv6) {
		return ipv6Packet{}, false
	}
	ip := frame[ethHeaderLen:]
	if ip[0]>>4 != 6 || ip[6] != protoICMPv6 {
		return ipv6Packet{}, false
	}
	plen := int(binary.BigEndian.Uint16(ip[4:6]))
	if ipv6HeaderLen+plen > len(ip) {
		return ipv6Packet{}, false
	}
	return ipv6Packet{
		ethDst:   net.HardwareAddr(frame[0:6]),
		ethSrc:   net.HardwareAddr(frame[6:12]),
		src:      netip.AddrFrom16([16]byte(ip[8:24])),
		dst:      netip.AddrFrom16([16]byte(ip[24:40])),
		hopLimit: ip[7],
		icmp:     ip[ipv6HeaderLen : ipv6HeaderLen+plen],
	}, true
}

// answerNS decides on one received frame and, when it is a valid neighbor
// solicitation (RFC 4861 section 7.1.1) for an address answers accepts,
// builds the advertisement: solicited and with Override set, from the
// target address itself, to the solicitation's source (or, for duplicate
// address detection from the unspecified address, to all nodes, unsolicited).
// A valid advertisement from another host for an address answers accepts, or
// a solicitation from such an address, is a claim on it (verdict claimed,
// target the address).
func answerNS(frame []byte, mac net.HardwareAddr, answers func(netip.Addr) bool) (reply []byte, target netip.Addr, v verdict) {
	pkt, ok := parseIPv6(frame)
	if !ok {
		return nil, target, dropMalformed
	}
	if bytes.Equal(pkt.ethSrc, mac) {
		return nil, target, dropOwnFrame
	}
	if len(pkt.icmp) >= 4 && pkt.icmp[0] == icmpTypeNA {
		return claimNA(pkt, mac, answers)
	}
	if len(pkt.icmp) < 4 || pkt.icmp[0] != icmpTypeNS {
		return nil, target, dropNotRequest
	}
	if pkt.ethDst[0]&1 == 0 && !bytes.Equal(pkt.ethDst, mac) {
		return nil, target, dropEthernetDest
	}
	if pkt.hopLimit != ndpHopLimit || pkt.icmp[1] != 0 || len(pkt.icmp) < 24 ||
		!validChecksum(pkt.src, pkt.dst, pkt.icmp) {
		return nil, target, dropInvalid
	}
	m, err := ndp.ParseMessage(pkt.icmp)
	if err != nil {
		return nil, target, dropMalformed
	}
	ns, ok := m.(*ndp.NeighborSolicitation)
	if !ok {
		return nil, target, dropNotRequest
	}
	if !pkt.src.IsUnspecified() && answers(pkt.src) {
		// Another host solicits from one of our addresses: it uses it.
		return nil, pkt.src, claimed
	}
	target = ns.TargetAddress
	if target.IsMulticast() || pkt.src.IsMulticast() {
		return nil, target, dropInvalid
	}
	snm, err := ndp.SolicitedNodeMulticast(target)
	if err != nil {
		return nil, target, dropInvalid
	}
	if pkt.dst != target && pkt.dst != snm {
		return nil, target, dropInvalid
	}
	var sourceLL net.HardwareAddr
	for _, o := range ns.Options {
		if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == ndp.Source {
			sourceLL = lla.Addr
		}
	}
	dad := pkt.src.IsUnspecified()
	if dad && (pkt.dst != snm || sourceLL != nil) {
		return nil, target, dropInvalid
	}
	if !answers(target) {
		return nil, target, dropNotAnswered
	}
	var out []byte
	switch {
	case dad:
		// RFC 4861 section 7.2.4: defend the address, to all nodes.
		out, err = naFrame(mac, target, ipv6AllNodes(), ethAllNodes(), false)
	default:
		// A unicast reachability probe may carry no source link-layer
		// option (RFC 4861 section 7.2.2): answer the frame's sender.
		ethDst := sourceLL
		if len(ethDst) != 6 {
			ethDst = pkt.ethSrc
		}
		out, err = naFrame(mac, target, pkt.src, ethDst, true)
	}
	if err != nil {
		return nil, target, dropMalformed
	}
	return out, target, answered
}

// claimNA decides on a neighbor advertisement: valid (RFC 4861 section
// 7.1.2), from another host, for an address answers accepts, it is a claim.
func claimNA(pkt ipv6Packet, mac net.HardwareAddr, answers func(netip.Addr) bool) ([]byte, netip.Addr, verdict) {
	if pkt.hopLimit != ndpHopLimit || pkt.icmp[1] != 0 || len(pkt.icmp) < 24 ||
		!validChecksum(pkt.src, pkt.dst, pkt.icmp) {
		return nil, netip.Addr{}, dropInvalid
	}
	m, err := ndp.ParseMessage(pkt.icmp)
	if err != nil {
		return nil, netip.Addr{}, dropMalformed
	}
	na, ok := m.(*ndp.NeighborAdvertisement)
	if !ok || na.TargetAddress.IsMulticast() {
		return nil, netip.Addr{}, dropInvalid
	}
	for _, o := range na.Options {
		if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == ndp.Target && bytes.Equal(lla.Addr, mac) {
			return nil, netip.Addr{}, dropOwnFrame
		}
	}
	if !answers(na.TargetAddress) {
		return nil, na.TargetAddress, dropNotRequest
	}
	return nil, na.TargetAddress, claimed
}

// unsolicitedNA builds the announcement for an IPv6 address: an
// advertisement to all nodes with Override set and the target as source.
func unsolicitedNA(mac net.HardwareAddr, addr netip.Addr) ([]byte, error) {
	return naFrame(mac, addr, ipv6AllNodes(), ethAllNodes(), false)
}

// naFrame builds a neighbor advertisement for target, sourced from target
// (ndisc6 accepts an advertisement only if its source is the target), with
// Override set and our link-layer address.
func naFrame(mac net.HardwareAddr, target, dst netip.Addr, ethDst net.HardwareAddr, solicited bool) ([]byte, error) {
	na := &ndp.NeighborAdvertisement{
		Solicited:     solicited,
		Override:      true,
		TargetAddress: target,
		Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: mac}},
	}
	icmp, err := ndp.MarshalMessageChecksum(na, target, dst)
	if err != nil {
		return nil, fmt.Errorf("marshal neighbor advertisement for %s: %w", target, err)
	}
	b := make([]byte, ethHeaderLen+ipv6HeaderLen+len(icmp))
	copy(b[0:6], ethDst)
	copy(b[6:12], mac)
	binary.BigEndian.PutUint16(b[12:14], uint16(ethernet.EtherTypeIPv6))
	ip := b[ethHeaderLen:]
	ip[0] = 6 << 4
	binary.BigEndian.PutUint16(ip[4:6], uint16(len(icmp)))
	ip[6] = protoICMPv6
	ip[7] = ndpHopLimit
	src16, dst16 := target.As16(), dst.As16()
	copy(ip[8:24], src16[:])
	copy(ip[24:40], dst16[:])
	copy(ip[ipv6HeaderLen:], icmp)
	return b, nil
}

// validChecksum verifies an ICMPv6 message's checksum over the IPv6
// pseudo-header (RFC 8200 section 8.1).
func validChecksum(src, dst netip.Addr, icmp []byte) bool {
	var sum uint32
	add := func(b []byte) {
		for len(b) >= 2 {
			sum += uint32(binary.BigEndian.Uint16(b))
			b = b[2:]
		}
		if len(b) == 1 {
			sum += uint32(b[0]) << 8
		}
	}
	s, d := src.As16(), dst.As16()
	add(s[:])
	add(d[:])
	var lenNext [8]byte
	binary.BigEndian.PutUint32(lenNext[0:4], uint32(len(icmp)))
	lenNext[7] = protoICMPv6
	add(lenNext[:])
	add(icmp)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff
}

// solicitedNodeMAC is the Ethernet multicast address of addr's
// solicited-node group (RFC 2464 section 7): 33:33 and the group's low 32
// bits.
func solicitedNodeMAC(addr netip.Addr) (net.HardwareAddr, error) {
	snm, err := ndp.SolicitedNodeMulticast(addr)
	if err != nil {
		return nil, fmt.Errorf("solicited-node group of %s: %w", addr, err)
	}
	b := snm.As16()
	return net.HardwareAddr{0x33, 0x33, b[12], b[13], b[14], b[15]}, nil
}
