package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"

	"github.com/vishvananda/netns"
)

// InNamespace runs fn on an OS thread switched into the named network
// namespace (one made with `ip netns add`). Sockets fn creates belong to
// that namespace for their whole life, whichever goroutine uses them later.
// fn must not start goroutines that create sockets: they would run on other
// threads, in the test's own namespace.
func InNamespace(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("e2e: current namespace: %w", err)
			return
		}
		defer func() { _ = orig.Close() }()
		target, err := netns.GetFromName(ns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("e2e: namespace %s: %w", ns, err)
			return
		}
		defer func() { _ = target.Close() }()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("e2e: enter %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			// The thread stays locked and ends with this goroutine, so no
			// other goroutine ever runs in the wrong namespace.
			errc <- errors.Join(ferr, fmt.Errorf("e2e: leave %s: %w", ns, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// DialerIn returns a gRPC context dialer whose TCP sockets are created in
// namespace ns.
func DialerIn(ns string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		var c net.Conn
		err := InNamespace(ns, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			return err
		})
		return c, err
	}
}
