// Package e2e runs Beacon's real binaries — ipamd and announcerd — in
// network namespaces, with real routers (FRR, BIRD, gobgpd) and real L2
// clients (arping, ndisc6, the client kernel's neighbour table), and measures
// what a client sees when an address moves. The end-to-end tests of
// tests/integration and the announce-bench program are built on it.
//
// # Topology
//
// A Cluster is a netlab.Lab with two segments (bridges in the lab's bridge
// namespace; the root namespace is untouched):
//
//   - the data segment (netlab.MainSegment), 192.0.2.0/24 and
//     2001:db8:1::/64: the client, an ARP prober, every node's eth0, and any
//     routers a test adds;
//   - the management segment ("mgmt"), 198.51.100.0/24: the "ctl" namespace
//     where ipamd runs, and every node's eth1.
//
// The nodes reach the IPAM over eth1, as on machines with a management
// NIC, so taking a node's eth0 down (or silencing it) does not break its
// IPAM session: what moves its addresses is then the interface state the
// announcer reports, not a broken stream.
//
// # Reaching ipamd from the test
//
// The test process lives in the root namespace, which has no route into the
// lab. ipamd listens on 198.51.100.1:7400 inside "ctl", and the test's gRPC
// client dials it with a dialer that creates each socket inside that
// namespace: a goroutine locks its OS thread, switches the thread into the
// namespace (setns), creates and connects the socket, and switches back. A
// socket stays in the namespace it was created in, so the connection works
// from any goroutine afterwards. This is a real gRPC client speaking to the
// real ipamd over a real (namespaced) network, with no proxy in between
// that could hide or add a failure, and ipamd can be restarted under it. See
// InNamespace.
//
// # Several replicas
//
// With Options.Replicas > 1 the ctl namespace runs that many ipamd
// replicas (replica i on ReplicaAddr(i): port 7400 + 10·i) sharing one
// etcd process (the test binary of `make testbins`, on the namespace's own
// loopback), every announcerd is given all of them, and the test's client
// spreads its calls over those that are up. RestartLab and its
// RollingRestart and RollingKill restart them in turn while watching FRR
// and the ARP prober.
//
// Everything a Cluster starts runs in its own namespaces, is tracked by PID
// and is stopped in Close, which then deletes the namespaces. Tests only
// send traffic inside those namespaces, to documentation addresses.
package e2e
