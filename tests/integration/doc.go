// Package integration tests Beacon end to end: the real binaries (built by
// `make test-integration` into $BEACON_BIN, or by the test itself), talking
// over real sockets with real etcd. The quickstart runs on loopback; the
// announcement tests run ipamd and announcerd in network namespaces with
// real routers (FRR, BIRD, gobgpd) and real L2 clients (arping, ndisc6, the
// kernel's neighbour table): see package e2e for the lab and how the test
// reaches ipamd inside it. They need root and skip, saying so, without it.
package integration
