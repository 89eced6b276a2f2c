package fleet

import (
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
		in, _ := st.Input("c1")
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
