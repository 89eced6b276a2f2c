//go:build testbins

// Package testbins pins the Kubernetes test binaries (kube-apiserver, etcd,
// kubectl) that the k8s-adapter's tests run against. It is a separate module,
// outside go.work, so that no other module inherits its replace lines. Nothing
// here is compiled into Beacon: `make testbins` builds the mains it names.
package testbins

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
