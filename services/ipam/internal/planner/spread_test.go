package planner

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// multi is an allocation of pool web with several addresses per family.
func multi(id string, addrs ...string) *ipam.Allocation {
	a := alloc(id, "web", addrs...)
	a.AddressCount = len(addrs)
	if slices.ContainsFunc(a.Addrs, netip.Addr.Is6) {
		a.AddressCount /= 2
	}
	return a
}

// nodesOf returns the owners of addrs, in their order.
func nodesOf(owners map[netip.Addr]string, addrs []netip.Addr) []string {
	var out []string
	for _, a := range addrs {
		out = append(out, owners[a])
	}
	return out
}

// distinct reports how many different owners addrs have.
func distinct(owners map[netip.Addr]string, addrs []netip.Addr) int {
	seen := map[string]bool{}
	for _, a := range addrs {
		seen[owners[a]] = true
	}
	return len(seen)
}

func spreadInput(t *testing.T, nodes int, allocs ...*ipam.Allocation) *Input {
	in := l2Input(t)
	in.Allocations = allocs
	in.Nodes = nil
	for i := range nodes {
		in.Nodes = append(in.Nodes, node(fmt.Sprintf("n%d", i+1), "rack", "a"))
	}
	return in
}

// Three addresses over three nodes have three owners; a node's loss moves
// its address only; its return takes back one address, and only one that
// shares a node. The incremental path (Affected) agrees at every step.
func TestSpreadFailoverAndReturn(t *testing.T) {
	a := multi("svc", "192.0.2.10", "192.0.2.11", "192.0.2.12")
	in := spreadInput(t, 3, a)
	owners := L2Owners(in)
	if got := distinct(owners, a.Addrs); got != 3 {
		t.Fatalf("owners %v: %d distinct nodes, want 3", nodesOf(owners, a.Addrs), got)
	}
	checkAffected(t, "allocate", in, nil, nil, a, false)

	for dead := range 3 {
		down := withOwners(in, owners)
		down.Nodes = slices.Clone(in.Nodes)
		gone := *in.Nodes[dead]
		gone.Live = false
		down.Nodes[dead] = &gone
		after := L2Owners(down)
		for _, ad := range a.Addrs {
			if owners[ad] != gone.Name && after[ad] != owners[ad] {
				t.Errorf("%s down: %s moved from live %s to %s", gone.Name, ad, owners[ad], after[ad])
			}
			if after[ad] == gone.Name {
				t.Errorf("%s down: %s still owned by it", gone.Name, ad)
			}
		}
		if got := distinct(after, a.Addrs); got != 2 {
			t.Errorf("%s down: owners %v, want 2 distinct nodes", gone.Name, nodesOf(after, a.Addrs))
		}
		// Back: exactly one address moves, to it, from a node that had two.
		back := L2Owners(withOwners(in, after))
		moved := 0
		for _, ad := range a.Addrs {
			if back[ad] != after[ad] {
				moved++
				if back[ad] != gone.Name {
					t.Errorf("%s back: %s moved to %s", gone.Name, ad, back[ad])
				}
			}
		}
		if moved != 1 || distinct(back, a.Addrs) != 3 {
			t.Errorf("%s back: owners %v from %v, want one move and 3 distinct nodes", gone.Name, nodesOf(back, a.Addrs), nodesOf(after, a.Addrs))
		}
		if diff := cmp.Diff(back, L2Owners(withOwners(in, back))); diff != "" {
			t.Errorf("%s back: not stable (-first +again):\n%s", gone.Name, diff)
		}
	}
}

// Fewer nodes than addresses: as even as possible, and dual-stack slots
// keep their two addresses on one node.
func TestSpreadUneven(t *testing.T) {
	tests := []struct {
		name  string
		nodes int
		a     *ipam.Allocation
		// want is how many slots each node owns, sorted.
		want []int
	}{
		{"five over two", 2, multi("svc", "192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5"), []int{2, 3}},
		{"four over three", 3, multi("svc", "192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"), []int{1, 1, 2}},
		{"two over one", 1, multi("svc", "192.0.2.1", "192.0.2.2"), []int{2}},
		{"three over five", 5, multi("svc", "192.0.2.1", "192.0.2.2", "192.0.2.3"), []int{1, 1, 1}},
		{"dual-stack three over three", 3, multi("svc", "192.0.2.1", "192.0.2.2", "192.0.2.3", "2001:db8::1", "2001:db8::2", "2001:db8::3"), []int{1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			owners := L2Owners(spreadInput(t, tt.nodes, tt.a))
			per := map[string]int{}
			for _, ad := range tt.a.Addrs {
				if ad.Is4() {
					per[owners[ad]]++
				}
			}
			got := slices.Sorted(maps.Values(per))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("slots per node (-want +got):\n%s", diff)
			}
			for _, ad := range tt.a.Addrs {
				if ad.Is6() {
					if anchor := slotAnchor(tt.a, ad); owners[ad] != owners[anchor] {
						t.Errorf("%s on %s, its slot's %s on %s", ad, owners[ad], anchor, owners[anchor])
					}
				}
			}
		})
	}
}

// A slot's anchor is the lowest address of the same rank in each family,
// whatever the order of the allocation's addresses.
func TestSlotAnchor(t *testing.T) {
	a := multi("svc", "2001:db8::2", "192.0.2.7", "2001:db8::1", "192.0.2.3")
	want := map[string]string{"192.0.2.3": "192.0.2.3", "192.0.2.7": "192.0.2.7", "2001:db8::1": "192.0.2.3", "2001:db8::2": "192.0.2.7"}
	got := map[string]string{}
	for _, ad := range a.Addrs {
		got[ad.String()] = slotAnchor(a, ad).String()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("anchors (-want +got):\n%s", diff)
	}
}
