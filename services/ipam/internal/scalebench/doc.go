// Package scalebench owns the IPAM's scale benchmarks (make bench-scale):
// the figures that say whether one IPAM holds a hundred clusters, a million
// allocations and ten thousand nodes. Each part builds its state with real
// writes to a real etcd, plays announcers as in-process gRPC clients over
// real connections, and measures at several sizes, so that docs/performance.md
// can show how each figure grows and what it predicts past what this machine
// holds. It is not part of make test: a run takes tens of minutes.
package scalebench
