module github.com/beaconlb/beacon/tests/integration

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/beaconlb/beacon/pkg v0.0.0-00010101000000-000000000000
	github.com/beaconlb/beacon/proto v0.0.0
	github.com/beaconlb/beacon/services/announcer v0.0.0
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/google/go-cmp v0.7.0
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/sys v0.48.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260928230214-8a89bd6388cc
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace (
	github.com/beaconlb/beacon/pkg => ../../pkg
	github.com/beaconlb/beacon/proto => ../../proto
	github.com/beaconlb/beacon/services/announcer => ../../services/announcer
)
