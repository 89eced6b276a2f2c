// Package adapter is Beacon's Kubernetes adapter: one controller per cluster
// that turns Services of type LoadBalancer into IPAM allocations and MetalLB's
// configuration resources into IPAM pools and announcement config.
//
// The program is cmd/k8s-adapter. Only internal/kube imports client-go; the
// rest is plain Go over the IPAM's gRPC API:
//
//   - internal/request: a Service's annotations and spec → an allocation request;
//   - internal/lb: the allocation steps (allocate, re-allocate, update, release);
//   - internal/metallb: MetalLB resources → IPAM resources;
//   - internal/kube: informers, work queue, status, events, leader election.
package adapter
