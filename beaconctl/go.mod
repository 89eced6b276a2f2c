module github.com/beaconlb/beacon/beaconctl

go 1.26.0

require (
	github.com/beaconlb/beacon/pkg v0.0.0
	github.com/beaconlb/beacon/proto v0.0.0
	github.com/google/go-cmp v0.7.0
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.10
	go.yaml.in/yaml/v3 v3.0.4
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace (
	github.com/beaconlb/beacon/pkg v0.0.0 => ../pkg
	github.com/beaconlb/beacon/proto v0.0.0 => ../proto
)
