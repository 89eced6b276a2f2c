// Package loopback finds free TCP ports on 127.0.0.1, for the processes
// tests and benchmarks start that must be told their ports before they
// listen (etcd members, kube-apiserver).
package loopback

import "net"

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago. It holds each open until all n are found, so none repeats;
// another process may still take one before its user binds it.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close() // free again for the caller
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
