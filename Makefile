# Beacon developer targets.

# Flags of ipam-bench, e.g. make bench BENCH_FLAGS="--duration 5s --out bench.txt".
BENCH_FLAGS ?= --duration 5s

.PHONY: bench
# IPAM benchmarks against raw etcd, on an embedded etcd in a temp dir and on
# loopback only; under a minute. BENCH lines on stdout, a table on stderr.
bench:
	go run ./services/ipam/cmd/ipam-bench $(BENCH_FLAGS)
