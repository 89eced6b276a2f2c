package announce

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// A node's cluster record marks its tenant changed when it is written and
// when it is deleted, and Input merges its labels over the registration's;
// the exclusion label makes the node announce nothing (as a drained one).
func TestClusterNodeRecords(t *testing.T) {
	st := NewState()
	st.Apply([]ipam.Event{{Ref: ipam.Ref{Kind: ipam.KindNode, ID: "c1/n1"}, Value: &ipam.Node{Tenant: "c1", Name: "n1", Labels: map[string]string{"zone": "a", "rack": "r1"}}}}, 1)
	st.Take()

	type node struct {
		Labels   map[string]string
		Draining bool
	}
	nodes := func() []node {
		in := st.Input("c1")
		var out []node
		for _, n := range in.Nodes {
			out = append(out, node{n.Labels, n.Draining})
		}
		return out
	}
	ref := ipam.Ref{Kind: ipam.KindClusterNode, ID: "c1/n1"}
	for _, step := range []struct {
		name string
		ev   ipam.Event
		want []node
	}{
		{"record written", ipam.Event{Ref: ref, Value: &ipam.ClusterNode{Tenant: "c1", ID: "n1", Labels: map[string]string{"zone": "b"}}},
			[]node{{map[string]string{"zone": "b", "rack": "r1"}, false}}},
		{"excluded", ipam.Event{Ref: ref, Value: &ipam.ClusterNode{Tenant: "c1", ID: "n1", Labels: map[string]string{ipam.ExcludeLabel: "true"}}},
			[]node{{map[string]string{"zone": "a", "rack": "r1", ipam.ExcludeLabel: "true"}, true}}},
		{"record deleted", ipam.Event{Ref: ref, Deleted: true},
			[]node{{map[string]string{"zone": "a", "rack": "r1"}, false}}},
	} {
		st.Apply([]ipam.Event{step.ev}, 2)
		if diff := cmp.Diff([]string{"c1"}, st.Take()); diff != "" {
			t.Fatalf("%s: changed tenants (-want +got):\n%s", step.name, diff)
		}
		if diff := cmp.Diff(step.want, nodes()); diff != "" {
			t.Fatalf("%s: planner's nodes (-want +got):\n%s", step.name, diff)
		}
	}
	// The registration itself is left as it was.
	n, _ := st.Node("c1", "n1")
	if diff := cmp.Diff(map[string]string{"zone": "a", "rack": "r1"}, n.Labels); diff != "" {
		t.Fatalf("registration changed: %s", diff)
	}
}

// Known: an address some node reported answering for stays known after the
// node is gone (a failover: its new owner does not probe), until the
// allocation holding it is deleted; an address recorded as another node's
// is known to every node but that one. ConflictsOf leaves out claims from
// the MACs of the tenant's own nodes.
func TestKnownAndConflicts(t *testing.T) {
	a1, a2 := netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.2")
	st := NewState()
	nodeRef := func(n string) ipam.Ref { return ipam.Ref{Kind: ipam.KindNode, ID: "c1/" + n} }
	allocRef := ipam.Ref{Kind: ipam.KindAllocation, ID: "c1/web"}
	st.Apply([]ipam.Event{
		{Ref: allocRef, Value: &ipam.Allocation{Tenant: "c1", ID: "web", Addrs: []netip.Addr{a1, a2}}},
		{Ref: nodeRef("n1"), Value: &ipam.Node{
			Tenant: "c1", Name: "n1", Interfaces: []ipam.Interface{{Name: "eth0", MAC: "02:00:00:00:00:01"}},
			Announced: []ipam.AnnouncedAddr{{Addr: a1.String()}},
			Conflicts: []ipam.AddrConflict{
				{Addr: a2.String(), Interface: "eth0", MAC: "02:00:00:00:00:99", BeforeAnswering: true},
				{Addr: a1.String(), Interface: "eth0", MAC: "02:00:00:00:00:02"}, // n2 handing a1 over
			},
		}},
		{Ref: nodeRef("n2"), Value: &ipam.Node{Tenant: "c1", Name: "n2", Interfaces: []ipam.Interface{{Name: "eth0", MAC: "02:00:00:00:00:02"}}}},
		{Ref: ipam.Ref{Kind: ipam.KindL2Owner, ID: "c1/" + a2.String()}, Value: &ipam.L2Owner{Node: "n1"}},
	}, 1)

	type known struct{ N1A1, N2A1, N1A2, N2A2 bool }
	check := func(step string, want known) {
		t.Helper()
		got := known{st.Known("c1", "n1", a1), st.Known("c1", "n2", a1), st.Known("c1", "n1", a2), st.Known("c1", "n2", a2)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: known (-want +got):\n%s", step, diff)
		}
	}
	check("n1 answers a1, owns a2", known{N1A1: true, N2A1: true, N2A2: true})
	got := st.ConflictsOf("c1", []string{a1.String(), a2.String()})
	want := []Conflict{{Node: "n1", AddrConflict: ipam.AddrConflict{Addr: a2.String(), Interface: "eth0", MAC: "02:00:00:00:00:99", BeforeAnswering: true}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conflicts (-want +got):\n%s", diff)
	}

	st.Apply([]ipam.Event{{Ref: nodeRef("n1"), Deleted: true}}, 2)
	check("n1 gone", known{N1A1: true, N2A1: true, N2A2: true})
	st.Apply([]ipam.Event{{Ref: allocRef, Deleted: true}}, 3)
	check("allocation deleted", known{N2A2: true})

	// A reload forgets addresses whose allocation went while it was not
	// watching.
	st.Apply([]ipam.Event{
		{Ref: allocRef, Value: &ipam.Allocation{Tenant: "c1", ID: "web", Addrs: []netip.Addr{a1}}},
		{Ref: nodeRef("n3"), Value: &ipam.Node{Tenant: "c1", Name: "n3", Announced: []ipam.AnnouncedAddr{{Addr: a1.String()}}}},
	}, 4)
	check("a1 answered again", known{N1A1: true, N2A1: true, N2A2: true})
	st.Replace(nil, 5)
	check("reloaded without the allocation", known{})
}

// The index by address keeps each address's holders in the order they
// came, through shared addresses, an allocation listing an address twice,
// updates that move an allocation and deletions of the first holder.
func TestHoldingByAddress(t *testing.T) {
	a1, a2 := netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")
	alloc := func(id string, addrs ...netip.Addr) ipam.Event {
		return ipam.Event{Ref: ipam.Ref{Kind: ipam.KindAllocation, ID: "c1/" + id}, Value: &ipam.Allocation{Tenant: "c1", ID: id, Addrs: addrs}}
	}
	gone := func(id string) ipam.Event {
		return ipam.Event{Ref: ipam.Ref{Kind: ipam.KindAllocation, ID: "c1/" + id}, Deleted: true}
	}
	st := NewState()
	holders := func(addr netip.Addr) []string {
		st.mu.Lock()
		defer st.mu.Unlock()
		var ids []string
		for _, a := range st.tenant("c1").holding(addr) {
			ids = append(ids, a.ID)
		}
		return ids
	}
	for _, step := range []struct {
		name   string
		ev     ipam.Event
		a1, a2 []string
	}{
		{"first holder", alloc("x", a1), []string{"x"}, nil},
		{"shared", alloc("y", a1), []string{"x", "y"}, nil},
		{"third, listing a1 twice", alloc("z", a1, a2, a1), []string{"x", "y", "z"}, []string{"z"}},
		{"first holder deleted", gone("x"), []string{"y", "z"}, []string{"z"}},
		{"middle one moved", alloc("z", a2), []string{"y"}, []string{"z"}},
		{"last holder of a1 deleted", gone("y"), nil, []string{"z"}},
		{"deleted twice", gone("y"), nil, []string{"z"}},
		{"all gone", gone("z"), nil, nil},
	} {
		st.Apply([]ipam.Event{step.ev}, 0)
		if diff := cmp.Diff(step.a1, holders(a1)); diff != "" {
			t.Errorf("%s: holders of %v (-want +got):\n%s", step.name, a1, diff)
		}
		if diff := cmp.Diff(step.a2, holders(a2)); diff != "" {
			t.Errorf("%s: holders of %v (-want +got):\n%s", step.name, a2, diff)
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if t1 := st.tenant("c1"); len(t1.byAddr)+len(t1.more) != 0 {
		t.Errorf("index not empty once every allocation is gone: %v, %v", t1.byAddr, t1.more)
	}
}
