module github.com/beaconlb/beacon/pkg

go 1.26
