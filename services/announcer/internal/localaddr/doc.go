// Package localaddr makes a bare-metal node's own kernel accept traffic for
// the L2 service addresses its announcer answers for.
//
// The L2 responder (package l2) answers ARP and neighbor solicitations for a
// service address without the address being configured anywhere, so a
// client sends the node its packets; but the node's kernel then drops them
// unless something makes the address local. In Kubernetes kube-proxy (or
// Cilium, ...) does that; on a machine without it, this package does it, as
// announcerd's --local-addresses-device option:
//
//   - every address the responder currently answers for, on any interface,
//     is a host address (/32, /128) on one dummy device (created if it does
//     not exist; an existing device of another kind is refused), IPv6 ones
//     with nodad;
//   - net.ipv4.conf.all.arp_ignore is raised to 1 and arp_announce to 2, so
//     the kernel never answers ARP for an address that is not on the
//     interface the request came in on, and never uses a service address as
//     the source of its own ARP requests: the responder stays the only
//     thing that answers, and only while the plan says this node owns the
//     address. Linux answers an IPv6 neighbor solicitation only for an
//     address on the receiving interface, so IPv6 needs no setting.
//
// An address leaves the device as soon as the responder stops answering for
// it. The device is the announcer's alone: at start every address on it
// (except IPv6 link-local ones) is removed as a leftover of an announcer
// that did not stop cleanly, and at shutdown all of them are removed again,
// and the device deleted if this run created it. The sysctls are left as
// set.
//
// It touches nothing but that device and those two sysctls, in the network
// namespace it runs in.
package localaddr
