// Package bench owns the IPAM's benchmarks: the end-to-end figures that
// ipam-bench prints, measured against a real embedded etcd on disk with fsync
// on, and the in-memory free-address search figures.
//
// One run measures, on the same etcd:
//
//   - raw etcd: c goroutines each committing single-key, allocation-shaped
//     transactions (create a fresh key if absent, with a ~200-byte value);
//   - Beacon: one replica serving gRPC on loopback, c goroutines each
//     calling Allocate for a fresh owner, each of which commits an
//     allocation, an address claim and an audit record;
//   - the ratios of the two, per concurrency;
//   - two references that decompose the gap: etcd alone committing the
//     writes of one allocation (two created keys and a leased audit key in
//     one transaction, "raw3"), and a gRPC round trip to the replica's
//     server that does nothing (a health check, "echo");
//   - against a cluster, raw etcd through the leader's endpoint only
//     ("rawleader"): the replica sends its transactions to the leader (see
//     store.Client), where a default etcd client balances them over every
//     member and followers forward them; this reference shows what of the
//     ratio that routing is;
//   - the lowest-free-address search of addrspace.FreeList against a naive
//     linear scan, through testing.Benchmark.
//
// Every figure is printed as one line "BENCH <name> <value> <unit>" (see
// Figure.Line), so that scripts can compare runs. Only loopback addresses are
// ever dialled or listened on.
package bench
