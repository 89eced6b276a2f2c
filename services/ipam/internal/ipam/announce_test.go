package ipam

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNodeEffective(t *testing.T) {
	for _, tc := range []struct {
		name         string
		registered   map[string]string
		cluster      *ClusterNode
		want         map[string]string
		wantExcluded bool
	}{
		{"no cluster record", map[string]string{"zone": "a"}, nil, map[string]string{"zone": "a"}, false},
		{"cluster record without labels", map[string]string{"zone": "a"}, &ClusterNode{}, map[string]string{"zone": "a"}, false},
		{"cluster wins on a shared key", map[string]string{"zone": "a", "rack": "r1"}, &ClusterNode{Labels: map[string]string{"zone": "b"}},
			map[string]string{"zone": "b", "rack": "r1"}, false},
		{"excluded by the cluster, any value", nil, &ClusterNode{Labels: map[string]string{ExcludeLabel: ""}},
			map[string]string{ExcludeLabel: ""}, true},
		{"excluded by the announcer's own labels", map[string]string{ExcludeLabel: "true"}, nil,
			map[string]string{ExcludeLabel: "true"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{Labels: tc.registered}
			got, excluded := n.Effective(tc.cluster)
			if diff := cmp.Diff(tc.want, got); diff != "" || excluded != tc.wantExcluded {
				t.Fatalf("labels (-want +got):\n%s\nexcluded = %v, want %v", diff, excluded, tc.wantExcluded)
			}
			if diff := cmp.Diff(tc.registered, n.Labels); diff != "" {
				t.Fatalf("the registration's labels changed: %s", diff)
			}
		})
	}
}
