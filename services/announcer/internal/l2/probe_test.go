package l2

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
)

// An ARP probe is RFC 5227's: a broadcast request from 0.0.0.0 for the
// address, target hardware address zero. A host that has the address (a
// Linux kernel) answers it with a reply whose sender is the address, which
// answerARP takes for a claim.
func TestARPProbe(t *testing.T) {
	addr := netip.MustParseAddr("198.51.100.7")
	b, err := arpProbe(ourMAC(), addr)
	if err != nil {
		t.Fatal(err)
	}
	want := arpSummary{
		EthDst: "ff:ff:ff:ff:ff:ff", EthSrc: ourMAC().String(), Op: arp.OperationRequest,
		SenderHW: ourMAC().String(), SenderIP: netip.IPv4Unspecified(),
		TargetHW: "00:00:00:00:00:00", TargetIP: addr,
	}
	if diff := cmp.Diff(want, decodeARP(t, b), addrEqual()); diff != "" {
		t.Errorf("probe (-want +got):\n%s", diff)
	}
	// Our own probe, seen on the socket, is not a claim.
	if _, _, v := answerARP(b, ourMAC(), answerOnly(addr.String())); v != dropOwnFrame {
		t.Errorf("own probe: %v, want %v", v, dropOwnFrame)
	}
	// The owner's answer is.
	reply := buildARP(t, arpIn{ethDst: ourMAC(), ethSrc: otherMAC(), op: arp.OperationReply, senderHW: otherMAC(), senderIP: addr.String(), targetIP: "0.0.0.0"})
	if _, target, v := answerARP(reply, ourMAC(), answerOnly(addr.String())); v != claimed || target != addr {
		t.Errorf("owner's reply: %v for %v, want %v for %v", v, target, claimed, addr)
	}
}

// A DAD probe is RFC 4862's: a solicitation from :: to the address's
// solicited-node group, hop limit 255, no source link-layer option, a
// valid checksum. Another responder takes it for a valid DAD solicitation.
func TestDADProbe(t *testing.T) {
	addr := netip.MustParseAddr("2001:db8::7")
	b, err := dadNS(ourMAC(), addr)
	if err != nil {
		t.Fatal(err)
	}
	pkt, ok := parseIPv6(b)
	if !ok {
		t.Fatalf("not an ICMPv6 packet: %x", b)
	}
	snm, _ := ndp.SolicitedNodeMulticast(addr)
	snmMAC, _ := solicitedNodeMAC(addr)
	type summary struct {
		EthDst, EthSrc string
		Src, Dst       netip.Addr
		HopLimit       uint8
		ChecksumOK     bool
	}
	got := summary{pkt.ethDst.String(), pkt.ethSrc.String(), pkt.src, pkt.dst, pkt.hopLimit, validChecksum(pkt.src, pkt.dst, pkt.icmp)}
	want := summary{snmMAC.String(), ourMAC().String(), netip.IPv6Unspecified(), snm, 255, true}
	if diff := cmp.Diff(want, got, addrEqual()); diff != "" {
		t.Errorf("DAD probe (-want +got):\n%s", diff)
	}
	m, err := ndp.ParseMessage(pkt.icmp)
	if err != nil {
		t.Fatal(err)
	}
	ns, ok := m.(*ndp.NeighborSolicitation)
	if !ok || ns.TargetAddress != addr || len(ns.Options) != 0 {
		t.Errorf("message %+v, want a solicitation for %s with no options", m, addr)
	}
	// Another node that answers for the address defends it (a valid DAD).
	if _, target, v := answerNS(b, otherMAC(), answerOnly(addr.String())); v != answered || target != addr {
		t.Errorf("another responder: %v for %v, want %v", v, target, answered)
	}
}

// isProbe tells probes (ARP from 0.0.0.0, DAD from ::) from ordinary
// requests, which a node probing an address leaves unanswered; another
// host's probe for it is a conflict (RFC 5227 section 2.1.1).
func TestIsProbe(t *testing.T) {
	v4, v6 := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("2001:db8::7")
	arpP, err := arpProbe(otherMAC(), v4)
	if err != nil {
		t.Fatal(err)
	}
	dad, err := dadNS(otherMAC(), v6)
	if err != nil {
		t.Fatal(err)
	}
	snm, _ := ndp.SolicitedNodeMulticast(v6)
	snmMAC, _ := solicitedNodeMAC(v6)
	tests := []struct {
		name  string
		frame []byte
		want  bool
	}{
		{"ARP probe", arpP, true},
		{"DAD", dad, true},
		{"ARP request", buildARP(t, arpIn{ethDst: ethernet.Broadcast, ethSrc: otherMAC(), op: arp.OperationRequest, senderHW: otherMAC(), senderIP: "198.51.100.9", targetIP: v4.String()}), false},
		{"solicitation", buildNS(t, nsIn{ethDst: snmMAC, ethSrc: otherMAC(), src: "2001:db8::9", dst: snm.String(), hopLimit: 255, target: v6.String(), sourceLL: otherMAC()}), false},
	}
	for _, tt := range tests {
		if got := isProbe(tt.frame); got != tt.want {
			t.Errorf("%s: isProbe = %v, want %v", tt.name, got, tt.want)
		}
	}
}
