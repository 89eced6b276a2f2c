// Package l2 makes a node answer for service addresses on its links: it
// replies to ARP requests (IPv4) and neighbor solicitations (IPv6) for the
// addresses it is told to own, and announces them (gratuitous ARP, unsolicited
// neighbor advertisements) when it takes them over.
//
// It owns the announcer's layer 2 wire work and is the only Beacon package
// that imports github.com/mdlayher/*. Only the announcer's reconciler (the
// code that turns a plan from the IPAM into a desired set of addresses per
// interface) should import it; it knows nothing of plans, nodes or gRPC.
//
// # How it listens
//
// Each interface with addresses to answer for gets two AF_PACKET sockets
// (github.com/mdlayher/packet), each with a classic BPF filter: one for ARP
// requests and one for ICMPv6 neighbor solicitations. Answers and
// announcements are whole Ethernet frames built here and written to those
// sockets. Nothing needs the service addresses, or any address at all, to be
// configured on the interface: not for IPv4 (arp.Dial would need one, so this
// package uses the arp package's packet types but not its Client) and not for
// IPv6.
//
// # The IPv6 NUD pitfall, and why AF_PACKET
//
// A client that has resolved a service address later checks that the entry
// is still good (neighbor unreachability detection) with a neighbor
// solicitation sent by unicast to the service address itself. The node's
// kernel does not own that address, so its IPv6 input drops the probe before
// any ICMPv6 socket (ndp.Listen) sees it; the client gets no answer and its
// entry goes to FAILED. Two fixes exist: make the address local (on lo or a
// dummy device, with arp_ignore/arp_announce and no DAD) or receive
// solicitations below IP. This package does the latter, for three reasons:
// the kernel's tables are never touched, so a crashed or superseded announcer
// leaves nothing behind that keeps taking traffic for an address another node
// now owns (and no sysctls have to be right for it to be safe); the same
// mechanism serves both families; and advertisements can carry the service
// address as their IPv6 source, which ndisc6 requires, without the kernel's
// source-address checks.
//
// Solicited-node multicast groups are joined on the packet socket
// (PACKET_ADD_MEMBERSHIP) so that NICs that filter multicast in hardware pass
// the solicitations up.
//
// # Failover
//
// Set swaps the set of answered addresses atomically: an address removed from
// it gets no further reply from the moment Set returns. An address added is
// announced at once and again after the delays in Options.Announcements
// (past Linux's one-second neighbour locktime), and whenever its interface's
// sockets are re-created (the interface came back, was re-created, or changed
// its MAC). Announcements and replies carry the Override flag, so clients
// replace an entry that still points at the previous node.
package l2
