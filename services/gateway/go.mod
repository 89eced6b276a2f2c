module github.com/beaconlb/beacon/services/gateway

go 1.26.0

replace (
	github.com/beaconlb/beacon/pkg => ../../pkg
	github.com/beaconlb/beacon/proto => ../../proto
)
