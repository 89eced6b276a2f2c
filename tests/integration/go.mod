module github.com/beaconlb/beacon/tests/integration

go 1.26.0

require github.com/google/go-cmp v0.7.0
