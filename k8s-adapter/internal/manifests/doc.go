// Package manifests checks deploy/k8s, the Kubernetes manifests: its test
// renders every overlay with kubectl kustomize, makes the credentials with
// `beaconctl certs deploy`, and applies both to a real kube-apiserver with a
// server-side dry run (the API server's own validation and defaulting), then
// checks what the overlays promise (replicas, budgets, probes, requests,
// least privilege). It holds no code of its own.
package manifests
