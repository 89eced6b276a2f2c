package l2

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/bpf"
)

// These tests need no privileges: they feed hand-built frames to the pure
// decision functions, in the spirit of MetalLB's arp_test.go, and check the
// outcome as a verdict plus the decoded reply.

func ourMAC() net.HardwareAddr   { return net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01} }
func peerMAC() net.HardwareAddr  { return net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0c} }
func otherMAC() net.HardwareAddr { return net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99} }

func addrEqual() cmp.Option { return cmpopts.EquateComparable(netip.Addr{}) }

func answerOnly(addrs ...string) func(netip.Addr) bool {
	set := make(map[netip.Addr]bool)
	for _, a := range addrs {
		set[netip.MustParseAddr(a)] = true
	}
	return func(a netip.Addr) bool { return set[a] }
}

// arpSummary is the decoded content of an ARP frame.
type arpSummary struct {
	EthDst, EthSrc string
	Op             arp.Operation
	SenderHW       string
	SenderIP       netip.Addr
	TargetHW       string
	TargetIP       netip.Addr
}

func decodeARP(t *testing.T, b []byte) arpSummary {
	t.Helper()
	var f ethernet.Frame
	if err := f.UnmarshalBinary(b); err != nil {
		t.Fatalf("decode Ethernet: %v", err)
	}
	if f.EtherType != ethernet.EtherTypeARP {
		t.Fatalf("EtherType %v, want ARP", f.EtherType)
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		t.Fatalf("decode ARP: %v", err)
	}
	return arpSummary{
		EthDst: f.Destination.String(), EthSrc: f.Source.String(), Op: p.Operation,
		SenderHW: p.SenderHardwareAddr.String(), SenderIP: p.SenderIP,
		TargetHW: p.TargetHardwareAddr.String(), TargetIP: p.TargetIP,
	}
}

type arpIn struct {
	ethDst, ethSrc     net.HardwareAddr
	op                 arp.Operation
	senderHW           net.HardwareAddr
	senderIP, targetIP string
}

func buildARP(t *testing.T, in arpIn) []byte {
	t.Helper()
	p, err := arp.NewPacket(in.op, in.senderHW, netip.MustParseAddr(in.senderIP), make(net.HardwareAddr, 6), netip.MustParseAddr(in.targetIP))
	if err != nil {
		t.Fatal(err)
	}
	pb, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	f := ethernet.Frame{Destination: in.ethDst, Source: in.ethSrc, EtherType: ethernet.EtherTypeARP, Payload: pb}
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAnswerARP(t *testing.T) {
	request := arpIn{ethDst: ethernet.Broadcast, ethSrc: peerMAC(), op: arp.OperationRequest,
		senderHW: peerMAC(), senderIP: "192.0.2.10", targetIP: "192.0.2.100"}
	with := func(f func(*arpIn)) arpIn { in := request; f(&in); return in }
	reply := &arpSummary{
		EthDst: peerMAC().String(), EthSrc: ourMAC().String(), Op: arp.OperationReply,
		SenderHW: ourMAC().String(), SenderIP: netip.MustParseAddr("192.0.2.100"),
		TargetHW: peerMAC().String(), TargetIP: netip.MustParseAddr("192.0.2.10"),
	}
	tests := []struct {
		name  string
		in    arpIn
		raw   []byte // used instead of in when set
		want  verdict
		reply *arpSummary
	}{
		{name: "broadcast request", in: request, want: answered, reply: reply},
		{name: "unicast request (reachability check)", in: with(func(in *arpIn) { in.ethDst = ourMAC() }), want: answered, reply: reply},
		{name: "probe from 0.0.0.0", in: with(func(in *arpIn) { in.senderIP = "0.0.0.0" }), want: answered,
			reply: &arpSummary{EthDst: peerMAC().String(), EthSrc: ourMAC().String(), Op: arp.OperationReply,
				SenderHW: ourMAC().String(), SenderIP: netip.MustParseAddr("192.0.2.100"),
				TargetHW: peerMAC().String(), TargetIP: netip.MustParseAddr("0.0.0.0")}},
		{name: "address not answered here", in: with(func(in *arpIn) { in.targetIP = "192.0.2.101" }), want: dropNotAnswered},
		{name: "unicast to another host", in: with(func(in *arpIn) { in.ethDst = otherMAC() }), want: dropEthernetDest},
		{name: "reply", in: with(func(in *arpIn) { in.op = arp.OperationReply }), want: dropNotRequest},
		{name: "another host's reply for our address (a claim)", in: with(func(in *arpIn) {
			in.op, in.senderIP, in.targetIP = arp.OperationReply, "192.0.2.100", "192.0.2.10"
		}), want: claimed},
		{name: "another host's gratuitous request for our address (a claim)", in: with(func(in *arpIn) {
			in.senderIP, in.targetIP = "192.0.2.100", "192.0.2.100"
		}), want: claimed},
		{name: "another host's reply for an address not answered here", in: with(func(in *arpIn) {
			in.op, in.senderIP, in.targetIP = arp.OperationReply, "192.0.2.101", "192.0.2.10"
		}), want: dropNotRequest},
		{name: "our own frame", in: with(func(in *arpIn) { in.ethSrc = ourMAC(); in.senderHW = ourMAC() }), want: dropOwnFrame},
		{name: "request for the broadcast address", in: with(func(in *arpIn) { in.targetIP = "255.255.255.255" }), want: dropInvalid},
		{name: "truncated", raw: buildARP(t, request)[:20], want: dropMalformed},
		{name: "not Ethernet/IPv4", raw: func() []byte {
			b := buildARP(t, request)
			binary.BigEndian.PutUint16(b[ethHeaderLen:], 6) // IEEE 802 hardware type
			return b
		}(), want: dropMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame := tt.raw
			if frame == nil {
				frame = buildARP(t, tt.in)
			}
			out, _, got := answerARP(frame, ourMAC(), answerOnly("192.0.2.100"))
			if got != tt.want {
				t.Fatalf("verdict %v, want %v", got, tt.want)
			}
			if tt.reply == nil {
				if out != nil {
					t.Fatalf("reply built for a dropped frame")
				}
				return
			}
			if diff := cmp.Diff(*tt.reply, decodeARP(t, out), addrEqual()); diff != "" {
				t.Errorf("reply (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGratuitousARP(t *testing.T) {
	frames, err := gratuitousARP(ourMAC(), netip.MustParseAddr("192.0.2.100"))
	if err != nil {
		t.Fatal(err)
	}
	var got []arpSummary
	for _, f := range frames {
		got = append(got, decodeARP(t, f))
	}
	vip := netip.MustParseAddr("192.0.2.100")
	want := []arpSummary{
		{EthDst: "ff:ff:ff:ff:ff:ff", EthSrc: ourMAC().String(), Op: arp.OperationRequest,
			SenderHW: ourMAC().String(), SenderIP: vip, TargetHW: "00:00:00:00:00:00", TargetIP: vip},
		{EthDst: "ff:ff:ff:ff:ff:ff", EthSrc: ourMAC().String(), Op: arp.OperationReply,
			SenderHW: ourMAC().String(), SenderIP: vip, TargetHW: ourMAC().String(), TargetIP: vip},
	}
	if diff := cmp.Diff(want, got, addrEqual()); diff != "" {
		t.Errorf("gratuitous ARP (-want +got):\n%s", diff)
	}
}

// naSummary is the decoded content of a neighbor advertisement frame.
type naSummary struct {
	EthDst, EthSrc               string
	Src, Dst                     netip.Addr
	HopLimit                     uint8
	ChecksumOK                   bool
	Router, Solicited, Override  bool
	Target                       netip.Addr
	TargetLinkLayer, SourceLLOpt string
}

func decodeNA(t *testing.T, b []byte) naSummary {
	t.Helper()
	pkt, ok := parseIPv6(b)
	if !ok {
		t.Fatalf("not an ICMPv6 packet: %x", b)
	}
	m, err := ndp.ParseMessage(pkt.icmp)
	if err != nil {
		t.Fatalf("parse NDP: %v", err)
	}
	na, ok := m.(*ndp.NeighborAdvertisement)
	if !ok {
		t.Fatalf("got %T, want a neighbor advertisement", m)
	}
	s := naSummary{
		EthDst: pkt.ethDst.String(), EthSrc: pkt.ethSrc.String(), Src: pkt.src, Dst: pkt.dst,
		HopLimit: pkt.hopLimit, ChecksumOK: validChecksum(pkt.src, pkt.dst, pkt.icmp),
		Router: na.Router, Solicited: na.Solicited, Override: na.Override, Target: na.TargetAddress,
	}
	for _, o := range na.Options {
		if lla, ok := o.(*ndp.LinkLayerAddress); ok {
			if lla.Direction == ndp.Target {
				s.TargetLinkLayer = lla.Addr.String()
			} else {
				s.SourceLLOpt = lla.Addr.String()
			}
		}
	}
	return s
}

type nsIn struct {
	ethDst, ethSrc net.HardwareAddr
	src, dst       string
	hopLimit       uint8
	target         string
	sourceLL       net.HardwareAddr // option omitted when nil
	msg            ndp.Message      // sent instead of a solicitation when set
	corrupt        bool             // flip a checksum bit
}

func buildNS(t *testing.T, in nsIn) []byte {
	t.Helper()
	src, dst := netip.MustParseAddr(in.src), netip.MustParseAddr(in.dst)
	m := in.msg
	if m == nil {
		ns := &ndp.NeighborSolicitation{TargetAddress: netip.MustParseAddr(in.target)}
		if in.sourceLL != nil {
			ns.Options = []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: in.sourceLL}}
		}
		m = ns
	}
	icmp, err := ndp.MarshalMessageChecksum(m, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if in.corrupt {
		icmp[2] ^= 0x01
	}
	b := make([]byte, ethHeaderLen+ipv6HeaderLen+len(icmp))
	copy(b[0:6], in.ethDst)
	copy(b[6:12], in.ethSrc)
	binary.BigEndian.PutUint16(b[12:14], uint16(ethernet.EtherTypeIPv6))
	ip := b[ethHeaderLen:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:6], uint16(len(icmp)))
	ip[6] = protoICMPv6
	ip[7] = in.hopLimit
	s16, d16 := src.As16(), dst.As16()
	copy(ip[8:24], s16[:])
	copy(ip[24:40], d16[:])
	copy(ip[ipv6HeaderLen:], icmp)
	return b
}

func TestAnswerNS(t *testing.T) {
	vip := netip.MustParseAddr("2001:db8::100")
	snmMAC, err := solicitedNodeMAC(vip)
	if err != nil {
		t.Fatal(err)
	}
	multicast := nsIn{ethDst: snmMAC, ethSrc: peerMAC(), src: "2001:db8::10", dst: "ff02::1:ff00:100",
		hopLimit: 255, target: "2001:db8::100", sourceLL: peerMAC()}
	with := func(f func(*nsIn)) nsIn { in := multicast; f(&in); return in }
	solicited := &naSummary{
		EthDst: peerMAC().String(), EthSrc: ourMAC().String(), Src: vip, Dst: netip.MustParseAddr("2001:db8::10"),
		HopLimit: 255, ChecksumOK: true, Solicited: true, Override: true, Target: vip, TargetLinkLayer: ourMAC().String(),
	}
	tests := []struct {
		name  string
		in    nsIn
		raw   []byte
		want  verdict
		reply *naSummary
	}{
		{name: "multicast solicitation", in: multicast, want: answered, reply: solicited},
		{
			// The NUD pitfall: a unicast probe to the service address,
			// usually without a source link-layer option.
			name: "unicast reachability probe without source link-layer option",
			in: with(func(in *nsIn) {
				in.ethDst, in.dst, in.sourceLL, in.ethSrc = ourMAC(), "2001:db8::100", nil, otherMAC()
			}),
			want: answered,
			reply: func() *naSummary {
				s := *solicited
				s.EthDst = otherMAC().String() // the frame's sender
				return &s
			}(),
		},
		{
			name: "duplicate address detection",
			in:   with(func(in *nsIn) { in.src, in.sourceLL = "::", nil }),
			want: answered,
			reply: &naSummary{
				EthDst: "33:33:00:00:00:01", EthSrc: ourMAC().String(), Src: vip, Dst: netip.MustParseAddr("ff02::1"),
				HopLimit: 255, ChecksumOK: true, Override: true, Target: vip, TargetLinkLayer: ourMAC().String(),
			},
		},
		{name: "DAD with a source link-layer option", in: with(func(in *nsIn) { in.src = "::" }), want: dropInvalid},
		{name: "DAD to the address itself", in: with(func(in *nsIn) { in.src, in.sourceLL, in.dst, in.ethDst = "::", nil, "2001:db8::100", ourMAC() }), want: dropInvalid},
		{name: "address not answered here", in: with(func(in *nsIn) { in.target, in.dst = "2001:db8::101", "ff02::1:ff00:101" }), want: dropNotAnswered},
		{name: "hop limit not 255 (routed)", in: with(func(in *nsIn) { in.hopLimit = 64 }), want: dropInvalid},
		{name: "bad checksum", in: with(func(in *nsIn) { in.corrupt = true }), want: dropInvalid},
		{name: "wrong destination group", in: with(func(in *nsIn) { in.dst = "ff02::1" }), want: dropInvalid},
		{name: "unicast frame to another host", in: with(func(in *nsIn) { in.ethDst = otherMAC() }), want: dropEthernetDest},
		{name: "our own frame", in: with(func(in *nsIn) { in.ethSrc = ourMAC() }), want: dropOwnFrame},
		{name: "another host's advertisement for our address (a claim)", in: with(func(in *nsIn) {
			in.msg = &ndp.NeighborAdvertisement{TargetAddress: vip, Override: true,
				Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: peerMAC()}}}
		}), want: claimed},
		{name: "another host's solicitation from our address (a claim)", in: with(func(in *nsIn) {
			in.src, in.target, in.dst = "2001:db8::100", "2001:db8::10", "ff02::1:ff00:10"
		}), want: claimed},
		{name: "an advertisement for an address not answered here", in: with(func(in *nsIn) {
			in.msg = &ndp.NeighborAdvertisement{TargetAddress: netip.MustParseAddr("2001:db8::101"), Override: true}
		}), want: dropNotRequest},
		{name: "an advertisement with a bad hop limit", in: with(func(in *nsIn) {
			in.msg, in.hopLimit = &ndp.NeighborAdvertisement{TargetAddress: vip, Override: true}, 64
		}), want: dropInvalid},
		{name: "truncated", raw: buildNS(t, multicast)[:ethHeaderLen+ipv6HeaderLen+10], want: dropMalformed},
		{name: "not IPv6", raw: buildARP(t, arpIn{ethDst: ethernet.Broadcast, ethSrc: peerMAC(), op: arp.OperationRequest,
			senderHW: peerMAC(), senderIP: "192.0.2.10", targetIP: "192.0.2.100"}), want: dropMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame := tt.raw
			if frame == nil {
				frame = buildNS(t, tt.in)
			}
			out, _, got := answerNS(frame, ourMAC(), answerOnly("2001:db8::100", "192.0.2.100"))
			if got != tt.want {
				t.Fatalf("verdict %v, want %v", got, tt.want)
			}
			if tt.reply == nil {
				if out != nil {
					t.Fatalf("reply built for a dropped frame")
				}
				return
			}
			if diff := cmp.Diff(*tt.reply, decodeNA(t, out), addrEqual()); diff != "" {
				t.Errorf("advertisement (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnsolicitedNA(t *testing.T) {
	vip := netip.MustParseAddr("2001:db8::100")
	b, err := unsolicitedNA(ourMAC(), vip)
	if err != nil {
		t.Fatal(err)
	}
	want := naSummary{
		EthDst: "33:33:00:00:00:01", EthSrc: ourMAC().String(), Src: vip, Dst: netip.MustParseAddr("ff02::1"),
		HopLimit: 255, ChecksumOK: true, Override: true, Target: vip, TargetLinkLayer: ourMAC().String(),
	}
	if diff := cmp.Diff(want, decodeNA(t, b), addrEqual()); diff != "" {
		t.Errorf("unsolicited advertisement (-want +got):\n%s", diff)
	}
}

func TestSolicitedNodeMAC(t *testing.T) {
	tests := []struct {
		addr string
		want string
	}{
		{"2001:db8::100", "33:33:ff:00:01:00"},
		{"2001:db8::abcd:ef12:3456", "33:33:ff:12:34:56"},
		{"fe80::1", "33:33:ff:00:00:01"},
	}
	for _, tt := range tests {
		got, err := solicitedNodeMAC(netip.MustParseAddr(tt.addr))
		if err != nil {
			t.Fatalf("%s: %v", tt.addr, err)
		}
		if diff := cmp.Diff(tt.want, got.String(), addrEqual()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.addr, diff)
		}
	}
	if _, err := solicitedNodeMAC(netip.MustParseAddr("192.0.2.1")); err == nil {
		t.Errorf("solicitedNodeMAC accepted an IPv4 address")
	}
}

// TestFilters runs the socket filters in x/net/bpf's interpreter, the same
// program the kernel runs on the packet sockets.
func TestFilters(t *testing.T) {
	arpReq := buildARP(t, arpIn{ethDst: ethernet.Broadcast, ethSrc: peerMAC(), op: arp.OperationRequest,
		senderHW: peerMAC(), senderIP: "192.0.2.10", targetIP: "192.0.2.100"})
	arpRep := buildARP(t, arpIn{ethDst: ourMAC(), ethSrc: peerMAC(), op: arp.OperationReply,
		senderHW: peerMAC(), senderIP: "192.0.2.10", targetIP: "192.0.2.100"})
	ns := buildNS(t, nsIn{ethDst: ourMAC(), ethSrc: peerMAC(), src: "2001:db8::10", dst: "2001:db8::100",
		hopLimit: 255, target: "2001:db8::100"})
	na, err := unsolicitedNA(peerMAC(), netip.MustParseAddr("2001:db8::100"))
	if err != nil {
		t.Fatal(err)
	}
	udp := append([]byte(nil), ns...)
	udp[ethHeaderLen+6] = 17 // next header UDP

	arpProg, err := arpFilter()
	if err != nil {
		t.Fatal(err)
	}
	nsProg, err := nsFilter()
	if err != nil {
		t.Fatal(err)
	}
	vm := func(raw []bpf.RawInstruction) *bpf.VM {
		insns, ok := bpf.Disassemble(raw)
		if !ok {
			t.Fatal("cannot disassemble filter")
		}
		v, err := bpf.NewVM(insns)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	arpVM, nsVM := vm(arpProg), vm(nsProg)

	type pass struct{ ARP, NS bool }
	tests := []struct {
		name  string
		frame []byte
		want  pass
	}{
		{"ARP request", arpReq, pass{ARP: true}},
		{"ARP reply", arpRep, pass{ARP: true}},
		{"neighbor solicitation", ns, pass{NS: true}},
		{"neighbor advertisement", na, pass{NS: true}},
		{"UDP over IPv6", udp, pass{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := arpVM.Run(tt.frame)
			if err != nil {
				t.Fatal(err)
			}
			n, err := nsVM.Run(tt.frame)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, pass{ARP: a > 0, NS: n > 0}, addrEqual()); diff != "" {
				t.Errorf("filters (-want +got):\n%s", diff)
			}
		})
	}
}
