package index

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// BenchmarkDecideReclaimHeld plans allocations from a full pool of 65,536
// addresses one of which is held: each decision reclaims the held address. Its
// cost is that of finding the pool's held addresses, paid under the
// index's lock.
func BenchmarkDecideReclaimHeld(b *testing.B) {
	x := New()
	p := pool(b, "full", "2001:db8::/112")
	events := []ipam.Event{poolEvent(p, 1)}
	base := netip.MustParseAddr("2001:db8::")
	addr := base
	var held netip.Addr
	for i := range 1 << 16 {
		c := &ipam.Claim{Addr: addr, Pool: "full", Tenant: "c1", Holders: []ipam.Holder{{Allocation: fmt.Sprintf("a%d", i)}}}
		if i == 1<<15 {
			held = addr
			c = &ipam.Claim{Addr: addr, Pool: "full", Tenant: "c1", HeldFor: "gone"}
			h := &ipam.Hold{Allocation: ipam.Allocation{Tenant: "c1", ID: "gone", Addrs: []netip.Addr{addr}, Pool: "full"}, ExpireTime: t0.Add(time.Hour)}
			events = append(events, ipam.Event{Ref: ipam.RefOf(ipam.KindHold, "c1", "gone"), Value: h, Rev: 2})
		}
		events = append(events, ipam.Event{Ref: ipam.ClaimRef(addr), Value: c, Rev: 2})
		addr = addr.Next()
	}
	x.Apply(events, 2)
	for i := 0; b.Loop(); i++ {
		pl, err := planAllocate(x, &ipam.Allocation{Tenant: "c1", Owner: fmt.Sprintf("o%d", i)}, t0)
		if err != nil {
			b.Fatal(err)
		}
		if len(pl.Alloc.Addrs) != 1 || pl.Alloc.Addrs[0] != held {
			b.Fatalf("planned %v, want the held %s", pl.Alloc.Addrs, held)
		}
		x.Unreserve(pl)
	}
}

// BenchmarkDecideFromPool plans allocations from two candidate pools and
// gives each up: the cost of one decision of assign on the index (the
// lowest free address of the first pool), and of its reservation, paid
// under the index's lock.
func BenchmarkDecideFromPool(b *testing.B) {
	x := New()
	x.Apply([]ipam.Event{poolEvent(pool(b, "a", "198.51.100.0/24"), 1), poolEvent(pool(b, "web", "203.0.113.0/24", "2001:db8::/64"), 1)}, 1)
	owners := make([]string, 1024)
	for i := range owners {
		owners[i] = fmt.Sprintf("o%d", i)
	}
	for i := 0; b.Loop(); i++ {
		pl, err := planAllocate(x, &ipam.Allocation{Tenant: "c1", Owner: owners[i%len(owners)]}, t0)
		if err != nil {
			b.Fatal(err)
		}
		x.Unreserve(pl)
	}
}
