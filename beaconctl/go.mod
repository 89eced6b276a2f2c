module github.com/beaconlb/beacon/beaconctl

go 1.26
