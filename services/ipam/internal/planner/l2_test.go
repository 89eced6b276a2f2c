package planner

import (
	"fmt"
	"hash/fnv"
	"maps"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// l2Input is three nodes, one pool "web" labelled tier=front, one L2
// advertisement of every pool, and one allocation of 192.0.2.1.
func l2Input(t *testing.T) *Input {
	return &Input{
		Pools:       pools(pool(t, "web", []string{"192.0.2.0/24"}, "tier", "front"), pool(t, "db", []string{"198.51.100.0/24"})),
		Allocations: []*ipam.Allocation{alloc("a1", "web", "192.0.2.1")},
		L2:          []*ipam.L2Advertisement{{Tenant: tenant, ID: "l2"}},
		Nodes:       []*ipam.Node{node("n1", "rack", "a"), node("n2", "rack", "b"), node("n3", "rack", "c")},
	}
}

func TestL2Eligibility(t *testing.T) {
	a1 := addr("192.0.2.1")
	tests := []struct {
		name   string
		change func(in *Input)
		// want are the nodes that may own a1; nil: a1 is not announced.
		want []string
	}{
		{"all nodes", func(in *Input) {}, []string{"n1", "n2", "n3"}},
		{"node selectors", func(in *Input) {
			in.L2[0].NodeSelectors = append(sels("rack", "a"), sel("rack", "c"))
		}, []string{"n1", "n3"}},
		{"pool by id", func(in *Input) { in.L2[0].Pools = []string{"web"} }, []string{"n1", "n2", "n3"}},
		{"pool not selected", func(in *Input) { in.L2[0].Pools = []string{"db"} }, nil},
		{"pool by label", func(in *Input) { in.L2[0].PoolSelectors = sels("tier", "front") }, []string{"n1", "n2", "n3"}},
		{"pool label not matching", func(in *Input) { in.L2[0].PoolSelectors = sels("tier", "back") }, nil},
		{"pool by id or label", func(in *Input) {
			in.L2[0].Pools = []string{"db"}
			in.L2[0].PoolSelectors = sels("tier", "front")
		}, []string{"n1", "n2", "n3"}},
		{"owner selector not matching", func(in *Input) { in.L2[0].OwnerSelectors = sels("app", "x") }, nil},
		{"owner selector matching", func(in *Input) {
			in.L2[0].OwnerSelectors = sels("app", "x")
			in.Allocations[0].OwnerLabels = selector.SetOf(labels("app", "x"))
		}, []string{"n1", "n2", "n3"}},
		{"draining and dead nodes", func(in *Input) {
			in.Nodes[0].Draining = true
			in.Nodes[1].Live = false
		}, []string{"n3"}},
		{"interfaces down", func(in *Input) {
			in.Nodes[0].Interfaces[0].Up = false
			in.Nodes[1].Interfaces = nil
		}, []string{"n3"}},
		{"named interface", func(in *Input) {
			in.L2[0].Interfaces = []string{"eth1"}
			in.Nodes[0].Interfaces = append(in.Nodes[0].Interfaces, ipam.Interface{Name: "eth1", Up: true})
			in.Nodes[1].Interfaces = append(in.Nodes[1].Interfaces, ipam.Interface{Name: "eth1", Up: false})
		}, []string{"n1"}},
		{"local policy", func(in *Input) { local(in.Allocations[0], "n2", "n3", "gone") }, []string{"n2", "n3"}},
		{"local policy without endpoints", func(in *Input) { local(in.Allocations[0]) }, nil},
		{"priorities: best tier", func(in *Input) {
			in.L2[0].NodePriorities = []ipam.NodePriority{
				{Priority: 50, Selector: sel("rack", "a")},
				{Priority: 10, Selector: sel("rack", "b")},
				{Priority: 10, Selector: sel("rack", "c")},
			}
		}, []string{"n2", "n3"}},
		{"priorities: falls back to next tier", func(in *Input) {
			in.L2[0].NodePriorities = []ipam.NodePriority{
				{Priority: 50, Selector: sel("rack", "a")},
				{Priority: 10, Selector: sel("rack", "b")},
			}
			in.Nodes[1].Live = false
		}, []string{"n1"}},
		{"priorities: unmatched nodes are the last tier", func(in *Input) {
			in.L2[0].NodePriorities = []ipam.NodePriority{{Priority: 10, Selector: sel("rack", "b")}}
			in.Nodes[1].Draining = true
		}, []string{"n1", "n3"}},
		{"priorities with local policy", func(in *Input) {
			in.L2[0].NodePriorities = []ipam.NodePriority{{Priority: 10, Selector: sel("rack", "a")}}
			local(in.Allocations[0], "n2", "n3")
		}, []string{"n2", "n3"}},
		{"two advertisements: union of nodes", func(in *Input) {
			in.L2[0].NodeSelectors = sels("rack", "a")
			in.L2 = append(in.L2, &ipam.L2Advertisement{Tenant: tenant, ID: "l2b", NodeSelectors: sels("rack", "b")})
		}, []string{"n1", "n2"}},
		{"two advertisements: best tier of either", func(in *Input) {
			in.L2 = append(in.L2, &ipam.L2Advertisement{Tenant: tenant, ID: "l2b",
				NodePriorities: []ipam.NodePriority{{Priority: 1, Selector: sel("rack", "c")}}})
		}, []string{"n3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := l2Input(t)
			tt.change(in)
			got, ok := L2Owners(in)[a1]
			if tt.want == nil {
				if ok {
					t.Fatalf("owner %s, want none", got)
				}
				return
			}
			if !contains(tt.want, got) {
				t.Fatalf("owner %q, want one of %v", got, tt.want)
			}
			ref, _ := refEligible(in, a1)
			if diff := cmp.Diff(tt.want, ref); diff != "" {
				t.Fatalf("reference disagrees with the test (-want +ref):\n%s", diff)
			}
			// Every eligible node, made the current owner, keeps the address.
			for _, n := range tt.want {
				if o := L2Owners(withOwners(in, map[netip.Addr]string{a1: n}))[a1]; o != n {
					t.Errorf("sticky owner %s lost the address to %s", n, o)
				}
			}
		})
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// manyAddrs is an input of n nodes and 200 addresses, all eligible.
func manyAddrs(t *testing.T, nodes int) *Input {
	in := &Input{
		Pools: pools(pool(t, "web", []string{"10.0.0.0/16"})),
		L2:    []*ipam.L2Advertisement{{Tenant: tenant, ID: "l2"}},
	}
	for i := range nodes {
		in.Nodes = append(in.Nodes, node(fmt.Sprintf("n%02d", i), "tier", fmt.Sprint(i%2)))
	}
	for i := range 200 {
		in.Allocations = append(in.Allocations, alloc(fmt.Sprintf("a%03d", i), "web", fmt.Sprintf("10.0.%d.%d", i/250, 1+i%250)))
	}
	return in
}

func TestL2Stickiness(t *testing.T) {
	t.Run("a joining node moves nothing", func(t *testing.T) {
		in := manyAddrs(t, 5)
		owners := L2Owners(in)
		in.Nodes = append(in.Nodes, node("n99"), node("n00a"))
		after := L2Owners(withOwners(in, owners))
		if diff := cmp.Diff(owners, after); diff != "" {
			t.Fatalf("owners moved (-before +after):\n%s", diff)
		}
	})
	t.Run("without sticky input, joining moves some", func(t *testing.T) {
		// The reason stickiness is needed: hashing alone would move about
		// 1/(n+1) of the addresses to the new node.
		in := manyAddrs(t, 5)
		owners := L2Owners(in)
		in.Nodes = append(in.Nodes, node("n99"))
		moved := 0
		for a, o := range L2Owners(in) {
			if owners[a] != o {
				moved++
				if o != "n99" {
					t.Errorf("%s moved from %s to %s, not to the new node", a, owners[a], o)
				}
			}
		}
		if moved == 0 {
			t.Fatal("the new node took nothing: the hash is not spreading")
		}
	})
	t.Run("a leaving owner moves only its addresses", func(t *testing.T) {
		in := manyAddrs(t, 5)
		owners := L2Owners(in)
		in.Nodes[2].Live = false
		gone := in.Nodes[2].Name
		after := L2Owners(withOwners(in, owners))
		for a, o := range owners {
			switch {
			case o == gone && after[a] == gone:
				t.Errorf("%s stayed on the dead node", a)
			case o != gone && after[a] != o:
				t.Errorf("%s moved from live %s to %s", a, o, after[a])
			}
		}
	})
	t.Run("a leaving owner moves the same way with or without stickiness", func(t *testing.T) {
		in := manyAddrs(t, 5)
		in.Nodes[3].Draining = true
		if diff := cmp.Diff(L2Owners(in), L2Owners(withOwners(in, L2Owners(manyAddrs(t, 5))))); diff != "" {
			t.Fatalf("rendezvous is not minimal-movement (-fresh +sticky):\n%s", diff)
		}
	})
	t.Run("a higher tier node coming back takes its addresses back", func(t *testing.T) {
		in := manyAddrs(t, 4)
		in.L2[0].NodePriorities = []ipam.NodePriority{{Priority: 1, Selector: sel("tier", "0")}}
		first := L2Owners(in)
		for a, o := range first {
			if o != "n00" && o != "n02" {
				t.Fatalf("%s owned by %s outside the best tier", a, o)
			}
		}
		in.Nodes[0].Live, in.Nodes[2].Live = false, false
		down := L2Owners(withOwners(in, first))
		for a, o := range down {
			if o != "n01" && o != "n03" {
				t.Fatalf("%s owned by %s, want the fallback tier", a, o)
			}
		}
		in.Nodes[0].Live, in.Nodes[2].Live = true, true
		if diff := cmp.Diff(first, L2Owners(withOwners(in, down))); diff != "" {
			t.Fatalf("the best tier did not take its addresses back (-first +back):\n%s", diff)
		}
	})
	t.Run("spread", func(t *testing.T) {
		in := manyAddrs(t, 4)
		count := map[string]int{}
		for _, o := range L2Owners(in) {
			count[o]++
		}
		for _, n := range in.Nodes {
			if c := count[n.Name]; c < 25 || c > 75 {
				t.Errorf("%s owns %d of 200 addresses", n.Name, c)
			}
		}
	})
}

// TestRendezvousGolden pins the hash: every replica, of every version, must
// pick the same owner. If this fails, the change moves addresses on upgrade.
func TestRendezvousGolden(t *testing.T) {
	if got, want := nodeKey("node-a"), uint64(0x48e86629c152a3f3); got != want {
		t.Errorf("nodeKey(node-a) = %#x, want %#x", got, want)
	}
	if got, want := addrKey(addr("192.0.2.1")), uint64(0xc0d7485a1a120608); got != want {
		t.Errorf("addrKey(192.0.2.1) = %#x, want %#x", got, want)
	}
	if got, want := addrKey(addr("2001:db8::1")), uint64(0x25a0de9d449b9870); got != want {
		t.Errorf("addrKey(2001:db8::1) = %#x, want %#x", got, want)
	}
	in := &Input{
		Pools: pools(pool(t, "p", []string{"192.0.2.0/24", "2001:db8::/64"})),
		L2:    []*ipam.L2Advertisement{{Tenant: tenant, ID: "l2"}},
		Nodes: []*ipam.Node{node("node-a"), node("node-b"), node("node-c"), node("node-d")},
		Allocations: []*ipam.Allocation{
			alloc("a", "p", "192.0.2.1", "2001:db8::1"),
			alloc("b", "p", "192.0.2.2"),
			alloc("c", "p", "192.0.2.3"),
			alloc("d", "p", "192.0.2.4"),
		},
	}
	golden := map[string]string{
		"192.0.2.1":   "node-c",
		"192.0.2.2":   "node-d",
		"192.0.2.3":   "node-c",
		"192.0.2.4":   "node-b",
		"2001:db8::1": "node-c",
	}
	want := map[netip.Addr]string{}
	for k, v := range golden {
		want[addr(k)] = v
	}
	if diff := cmp.Diff(want, L2Owners(in)); diff != "" {
		t.Fatalf("rendezvous owners changed (-want +got):\n%s", diff)
	}
}

// TestHashIsFNV1a checks the hand-written FNV-1a against the standard
// library's.
func TestHashIsFNV1a(t *testing.T) {
	for _, name := range []string{"", "node-a", "worker-17.example.com"} {
		h := fnv.New64a()
		h.Write([]byte(name))
		if got, want := nodeKey(name), mix64(h.Sum64()); got != want {
			t.Errorf("nodeKey(%q) = %#x, want %#x", name, got, want)
		}
	}
	for _, s := range []string{"192.0.2.1", "2001:db8::1"} {
		a := addr(s)
		h := fnv.New64a()
		fam := byte(6)
		if a.Is4() {
			fam = 4
		}
		b := a.As16()
		h.Write(append([]byte{fam}, b[:]...))
		if got, want := addrKey(a), h.Sum64(); got != want {
			t.Errorf("addrKey(%s) = %#x, want %#x", s, got, want)
		}
	}
}

// A dual-stack allocation's two addresses are answered for by one node, as
// in MetalLB: the IPv6 address follows the IPv4 one, also when its owner
// dies, and an older split (recorded before this rule) is mended.
func TestL2DualStackOneNode(t *testing.T) {
	in := &Input{
		Pools: pools(pool(t, "web", []string{"192.0.2.0/24", "2001:db8::/120"})),
		L2:    []*ipam.L2Advertisement{{Tenant: tenant, ID: "l2"}},
	}
	for i := range 6 {
		in.Nodes = append(in.Nodes, node(fmt.Sprintf("n%02d", i)))
	}
	for i := range 40 {
		in.Allocations = append(in.Allocations, alloc(fmt.Sprintf("a%02d", i), "web", fmt.Sprintf("192.0.2.%d", i), fmt.Sprintf("2001:db8::%x", i)))
	}
	same := func(what string, owners map[netip.Addr]string) {
		t.Helper()
		for _, a := range in.Allocations {
			if v4, v6 := owners[a.Addrs[0]], owners[a.Addrs[1]]; v4 == "" || v4 != v6 {
				t.Fatalf("%s: %s owned by %q and %s by %q", what, a.Addrs[0], v4, a.Addrs[1], v6)
			}
		}
	}
	owners := L2Owners(in)
	same("fresh", owners)

	split := maps.Clone(owners)
	v6 := in.Allocations[0].Addrs[1]
	for _, n := range in.Nodes {
		if n.Name != owners[v6] {
			split[v6] = n.Name // as an older replica may have recorded
			break
		}
	}
	same("from a split", L2Owners(withOwners(in, split)))

	dead := owners[in.Allocations[0].Addrs[0]]
	for _, n := range in.Nodes {
		if n.Name == dead {
			n.Live = false
		}
	}
	after := L2Owners(withOwners(in, owners))
	same("after its owner died", after)
	if after[in.Allocations[0].Addrs[0]] == dead {
		t.Fatal("the address stayed on the dead node")
	}
}
