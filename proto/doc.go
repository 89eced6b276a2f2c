// Package proto holds Beacon's API contract: the .proto files under beacon/
// and the Go code generated from them next to each file. Nothing else lives
// here; regenerate with `make generate`.
package proto
