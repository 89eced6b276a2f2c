// Package planner decides what every node of a tenant announces: which node
// answers ARP/NDP for each L2 address, which prefixes each node advertises to
// which BGP peers with which attributes, and which BGP sessions each node
// keeps. It also finds configuration that can never work, and computes the
// change one allocation makes without replanning everything.
//
// It is a pure function of its Input (configuration, allocations, nodes with
// their liveness and interfaces, and the current L2 owners): no I/O, no
// clock, no goroutines, no state between calls. Every IPAM replica given the
// same Input computes the same plans, which is what lets replicas agree on
// L2 owners without talking to each other. It imports only the standard
// library and Beacon's pure packages (ipam, selector); the IPAM's fan-out
// imports it, and nothing in it knows about etcd or gRPC.
//
// The semantics are MetalLB's (advertisements select pools by ID or label
// and owners by label, node selectors on advertisements and peers, LOCAL
// traffic policy announcing only from endpoint nodes, aggregation,
// communities and local preference; a prefix goes only to peers whose
// address is of its family), plus L2 node priorities and sticky,
// rendezvous-hashed L2 ownership, and the addresses of an allocation with
// several per family spread over distinct L2 owners (active-active L2, see
// spread). L2Owners, Plans, Check and Affected document the rules.
//
// Cost of each function, for N nodes, A allocations (addresses), L L2 and B
// BGP advertisements, P peers, K classes of active nodes selected by the
// same advertisements and peers, and R distinct (prefix, peer) routes:
//
//   - Every function first compiles its Input: O(N log N) to sort the nodes
//     and O(N·(L+B+P)) selector evaluations, each node against each node
//     selector once.
//   - L2Owners: O(A·L) selector evaluations and O(A log A) sorting, then
//     rendezvous hashing in O(T) per address for T nodes in its best tier
//     (at most N: O(A·N) hash evaluations in the worst case, a few
//     nanoseconds each); an allocation with S slots spreads them in O(S·T).
//   - Plans: O(A·(L+B)) selector evaluations, O(A log A) sorting, O(K·R)
//     routes built (nodes of one class share one Routes list), and O(A) for
//     L2; plus O(R) for each node that is an endpoint of a LOCAL allocation
//     announced over BGP, which needs its own copy of its routes. That copy
//     dominates when LOCAL allocations spread over many nodes (in the
//     benchmark, 1,000 nodes and 10,000 allocations: about 10 ms without,
//     200 ms and 500 MB with).
//   - Plan (one node): as Plans, but routes and L2 for that node only.
//   - Check: O(A·B) to aggregate prefixes, O(B·pools·ranges) for
//     aggregation lengths, O(N·B·P) for node intersections.
//   - Affected: O(A) to find the allocations sharing the changed
//     allocation's addresses or aggregated prefixes, then O(N·P) per
//     affected prefix and O(N) per address.
//   - Replan and Owners, on an Input compiled once (Prepare) for a stream
//     of allocation and L2 owner changes: O(1) per changed address through
//     the caller's index of allocations by address, O(N·P) per changed
//     prefix, O(A) only to find the allocations inside an aggregated
//     prefix. This is what the IPAM runs per change (see package announce).
//   - Diff and Apply: linear in the sizes of the plans and the delta, but
//     for the routes, which Apply patches in O(R/128 + 128) per chunk of
//     128 routes it changes (ipam.Routes: chunked, the chunks a change does
//     not touch shared); ApplyAll applies a route change that every node of
//     a class sees once for the class.
//
// Plans and deltas share slices and pointers with each other and with the
// Input: treat them as read-only.
package planner
