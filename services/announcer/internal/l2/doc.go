// Package l2 makes a node answer for service addresses on its links: it
// replies to ARP requests (IPv4) and neighbor solicitations (IPv6) for the
// addresses it is told to own, and announces them (gratuitous ARP, unsolicited
// neighbor advertisements) when it takes them over.
//
// It owns the announcer's layer 2 wire work and is the only Beacon package
// that imports github.com/mdlayher/*. Only the announcer's reconciler (the
// code that turns a plan from the IPAM into a desired set of addresses per
// interface) and the test-support package l2lab should import it; it knows
// nothing of plans, nodes or gRPC.
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
// # Interfaces come and go
//
// Run keeps an interface's sockets open while the interface exists and is up
// with carrier. A socket that fails (the interface went down or was deleted)
// ends its reader; Run then closes the interface's sockets and opens new
// ones when the interface is usable again, with the same name (a new index
// or MAC is fine), and announces its addresses anew. Run learns of changes
// from the kernel's link notifications (netlink) and re-checks every
// Options.CheckInterval in case it misses one; calling Set again also makes
// it re-check at once.
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
// Each address's solicited-node multicast group is joined twice: on the
// packet socket (PACKET_ADD_MEMBERSHIP), so that NICs that filter multicast
// in hardware pass its solicitations up, and on an otherwise unused UDP
// socket (IPV6_JOIN_GROUP), so that the kernel sends MLD reports and
// MLD-snooping switches forward the group to this node. The second needs
// IPv6 enabled on the interface; without it a warning is logged and the
// responder still works on switches that flood.
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
//
// # Conflict detection
//
// With Options.Probe.Count > 0 a node checks, before it first answers for an
// address on an interface, that no other host uses it (MetalLB #306): for
// IPv4 it sends RFC 5227 ARP probes (sender address 0.0.0.0), for IPv6
// duplicate address detection solicitations (RFC 4862, source ::), Count of
// them Interval apart, then waits Wait. Any claim on the address meanwhile
// (an ARP packet whose sender address is it, a neighbor advertisement for
// it, a solicitation from it), or another host's probe for it, is a
// conflict: the node does not answer for the address on that interface,
// records the conflict with the other host's MAC (Conflicts), and probes
// again every Retry until the address is free.
//
// Addresses the IPAM says Beacon was already answering for (SetKnown: a
// failover between Beacon's own nodes, or this announcer restarting) are not
// probed: they are answered at once, so probing adds no delay to failover.
//
// A claim on an address the node already answers for (another host starts
// using it) is recorded as a conflict too, besides being defended; such a
// conflict is forgotten Hold after the last claim seen.
package l2
