package loopback

import (
	"fmt"
	"net"
	"testing"
)

func TestFreePorts(t *testing.T) {
	ports, err := FreePorts(32)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 32 {
		t.Fatalf("got %d ports, want 32", len(ports))
	}
	seen := make(map[int]bool)
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d returned twice in %v", p, ports)
		}
		seen[p] = true
		// Free again: the caller can bind it.
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		_ = l.Close()
	}
}
