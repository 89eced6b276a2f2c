// Package integration tests Beacon end to end: the real binaries (built by
// `make test-integration` into $BEACON_BIN, or by the test itself), talking
// over real sockets on loopback, with real etcd.
package integration
