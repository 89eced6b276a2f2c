// Package pkg is the root of Beacon's small shared module: code that more
// than one of Beacon's binaries needs (their common main in daemon,
// telemetry, operational HTTP endpoints, free loopback ports for the tests
// and benchmarks that start etcd and kube-apiserver). Keep it small;
// anything only one service uses lives in that service's internal/.
package pkg
