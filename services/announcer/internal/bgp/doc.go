// Package bgp is the announcer's BGP speaker: it reconciles a desired set of
// peers and per-peer route advertisements into GoBGP v4, used as a library
// (no gRPC listener, no BGP listener unless asked). It is the only package in
// Beacon that imports GoBGP; the announcer's reconciler imports it, tests and
// test support (bgplab) drive it.
//
// How per-peer advertisement works. GoBGP keeps one table for all ordinary
// peers and has no per-neighbor export policy for them (only route-server
// clients get one), so the Speaker puts exactly one locally originated path
// per desired prefix into the global table, with no attributes of its own,
// and decides what each peer receives in the global export policy: one
// statement per (peer, attribute set) that matches the peer's address (a
// neighbor set; on export GoBGP matches it against the receiving peer) and
// the set's prefixes (an exact-length prefix set), adds the communities,
// large communities and local preference, and accepts. The default export
// action is reject, so a route reaches only the peers it is meant for. When a
// prefix stays in the table but a peer's share of it changes (other
// attributes, or no longer for that peer), the Speaker soft-resets that peer
// outbound: GoBGP then re-sends what the policy now gives and withdraws what
// it no longer does.
//
// The global import policy accepts local routes only (default reject): an
// announcer never needs a learned route, and a learned path left in the
// table is how a withdrawn address can live on (the stale-route trap of the
// lab notes, docs/lab.md; TestStaleRouteTrap). A default-reject policy
// without the local-route statement would also reject the Speaker's own
// routes, silently.
//
// Sessions use the peer's address family: IPv4 prefixes go to IPv4 peers and
// IPv6 prefixes to IPv6 peers (multiprotocol BGP, family set on every path as
// v4 requires). Apply refuses what cannot work (duplicate names or
// addresses, a route for an unknown peer or of the other family, a per-peer
// router ID, hold times below three seconds) and applies the rest.
//
// Sessions reports each desired peer's session and, while it is
// established, the prefixes GoBGP's adj-RIB-out holds for it: what the
// export policy gives that peer in the session's family, which is what the
// peer is sent. Apply refreshes them before it returns, Run when a session
// comes up and whenever GoBGP's advertised count stops matching them.
//
// Run owns GoBGP's lifetime: it starts the server (and GoBGP's own
// goroutines) and, when its context ends, withdraws everything and stops
// with a Cease NOTIFICATION, so routers drop the routes at once. With
// Options.KeepRoutesOnExit it stops without NOTIFICATION instead (GoBGP's
// StopBgp with AllowGracefulRestart), so peers that negotiated graceful
// restart keep the routes as stale for the restart time while a new process
// takes over.
//
// GoBGP v4's BFD runs per peer (asynchronous mode, UDP 3784, no
// authentication, no echo, no passive mode); when it goes down GoBGP resets
// the session. BFDConfig.Passive is accepted for compatibility and has no
// effect. After every such reset the Speaker re-creates the peer in GoBGP
// once its session is down: GoBGP would otherwise send the reset's Cease to
// the next session the moment it is Established, and its BFD would keep a
// stale remote discriminator, which against BIRD loops a session down and
// up for minutes (issue 20; the root cause is in bfdreset.go).
package bgp
