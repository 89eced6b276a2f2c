// Package netlab builds throwaway network labs out of Linux network namespaces
// and runs real routers in them, for tests. No production code imports it:
// test files and test-support packages do, the announcer's and the end-to-end
// tests' in tests/integration (which is why it is not internal). It uses only
// the standard library, so importing it drags in nothing else.
//
// A Lab owns a temporary directory, a bridge namespace (a Linux bridge, the
// root namespace untouched) and one namespace per host, each joined to the
// bridge by a veth pair whose host end is eth0. Namespace names carry the
// process ID and a random suffix, so labs of parallel test binaries never
// collide. More segments (further bridges in the bridge namespace, e.g. a
// management network) can be added with AddSegment, and hosts joined to them
// by further interfaces (Host.Attach). Hosts get IPv4 and IPv6 addresses
// (IPv6 with nodad, and duplicate address detection off, so addresses are
// usable at once). Tests must only use the documentation ranges
// 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24 and 2001:db8::/32, and only
// inside namespaces they made.
//
// Every process a Lab starts runs inside a namespace through `ip netns exec`
// (which execs, so the PID the Lab tracks is the program's own), writes its
// output to a log file in the Lab's directory, and is stopped by PID in
// Close: SIGTERM, then SIGKILL. Close then deletes the namespaces and the
// directory. NewForTest ties Close to t.Cleanup and prints the tails of the
// processes' logs when the test failed.
//
// Routers: FRR (bgpd alone, or zebra+bgpd+bfdd so routes land in the router
// namespace's kernel and BFD works), BIRD 2 and gobgpd, each started from a
// generated configuration and queried through its own CLI (vtysh JSON,
// birdc text, gobgp JSON) into one Path type. RouteMonitor follows a
// namespace's kernel routing table with `ip monitor route` and timestamps
// each change as it is read, which is how withdrawal times are measured.
//
// Code under test that opens sockets must run inside a host namespace. A Go
// process's sockets belong to the namespace of the thread that created them,
// and the Go runtime moves goroutines between threads, so a test cannot
// switch namespaces for a library in-process. The pattern used here is the
// helper process: the test binary re-executes itself inside the namespace
// (Host.Start with os.Executable and an environment variable that TestMain
// checks) and drives the child over its standard input and output. The bgp
// package's bgplab does this for its Speaker.
//
// Waiting is always polling with a deadline (Eventually), never a fixed
// sleep.
//
// Needed on the machine (Debian packages): iproute2 (ip, tc), procps
// (sysctl), and for the routers frr, bird2 and gobgpd. Everything needs root.
package netlab
