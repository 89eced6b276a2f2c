package replica_test

import (
	"context"
	"slices"
	"testing"
	"time"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// A replica dialed to every member of a cluster sends its transactions to
// the leader's endpoint, and follows the leader when it changes.
func TestTransactionsFollowTheLeader(t *testing.T) {
	members, endpoints := startEtcdCluster(t)
	client, err := store.Dial(ctxT(t), store.DialConfig{Endpoints: endpoints})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	n := startNode(t, client, replica.Options{})
	mustPool(t, n, "lead", &ipamv1.Pool{Ranges: []string{"198.51.100.0/28"}})
	// leader returns the member that leads, skipping a dead one (whose
	// IsLeader keeps its last answer).
	leader := func(dead int) (int, string) {
		for i, m := range members {
			if i != dead && m.IsLeader() {
				return i, m.Endpoints()[0]
			}
		}
		return -1, ""
	}
	var was int
	eventually(t, 10*time.Second, "transactions to go to the leader", func() bool {
		i, ep := leader(-1)
		was = i
		return i >= 0 && client.LeaderEndpoint() == ep
	})
	mustAllocate(t, n, "c1", &ipamv1.Allocation{Owner: "ns/before"})

	members[was].Kill() // no handover: the leader dies
	eventually(t, 20*time.Second, "transactions to follow the new leader", func() bool {
		i, ep := leader(was)
		return i >= 0 && client.LeaderEndpoint() == ep
	})
	// Allocations go on (the first may meet the election).
	eventually(t, 20*time.Second, "an allocation after the election", func() bool {
		_, err := allocate(ctxT(t), n, "c1", &ipamv1.Allocation{Owner: "ns/after"})
		return err == nil
	})
	if !slices.Contains(endpoints, client.LeaderEndpoint()) {
		t.Fatalf("leader endpoint %q is none of %v", client.LeaderEndpoint(), endpoints)
	}
	t.Logf("leader moved from %s to %s", members[was].Endpoints()[0], client.LeaderEndpoint())
}

// A closed client writes nothing, not even over the connection to the
// etcd leader, which its store keeps open until it stops: a replica whose
// etcd connection is cut as a killed process's is must not go on writing
// (the scale benchmark's crash saw its announcer sessions delete their
// registrations while their streams ended, and addresses move).
func TestClosedClientWritesNothing(t *testing.T) {
	_, endpoints := startEtcdCluster(t)
	client, err := store.Dial(ctxT(t), store.DialConfig{Endpoints: endpoints})
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, client, replica.Options{})
	mustPool(t, n, "closed", &ipamv1.Pool{Ranges: []string{"198.51.100.0/28"}})
	eventually(t, 10*time.Second, "transactions to go to the leader", func() bool {
		return client.LeaderEndpoint() != ""
	})
	mustAllocate(t, n, "c1", &ipamv1.Allocation{Owner: "ns/before"})
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	if ep := client.LeaderEndpoint(); ep != "" {
		t.Errorf("leader endpoint after Close: %q, want none", ep)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := allocate(ctx, n, "c1", &ipamv1.Allocation{Owner: "ns/after"}); err == nil {
		t.Errorf("allocation through a closed client succeeded: %v", got.GetAddresses())
	}
}
