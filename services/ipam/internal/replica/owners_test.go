package replica_test

import (
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
)

// A node that holds many L2 addresses dies: the elected replica records
// their new owners in chunks committed concurrently (fleet's recordOwners),
// and every one of them reaches the node left, on the other replica, once:
// none is lost, none stays with the dead node.
func TestSubscribeL2MoveOfManyAddresses(t *testing.T) {
	const count = 200 // four chunks of owner records
	env := startEtcd(t, t.TempDir())
	n := startNode(t, env.client, replica.Options{})
	n2 := startNode(t, env.dial(t), replica.Options{})
	mustPool(t, n, "lan", &ipamv1.Pool{Ranges: []string{fmt.Sprintf("198.51.100.1-198.51.100.%d", count)}})
	conn, err := grpc.NewClient(n.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := ctxT(t)
	if _, err := ipamv1.NewAnnouncementServiceClient(conn).CreateL2Advertisement(ctx, &ipamv1.CreateL2AdvertisementRequest{
		Parent: "tenants/c1", L2AdvertisementId: "lan", L2Advertisement: &ipamv1.L2Advertisement{Pools: []string{"pools/lan"}},
	}); err != nil {
		t.Fatal(err)
	}
	// node-a is alone when the addresses are allocated: it owns them all,
	// and keeps them when node-b comes (owners are sticky).
	a := subscribe(t, n.addr, "c1", "node-a", nil)
	for i := range count {
		mustAllocate(t, n, "c1", &ipamv1.Allocation{Owner: fmt.Sprintf("ns/svc-%d", i)})
	}
	waitFor(t, "node-a to answer for every address", func() bool { return len(a.l2Addrs()) == count })
	b := subscribe(t, n2.addr, "c1", "node-b", nil)
	defer b.kill()
	a.kill()
	took := waitFor(t, "node-b to answer for every address", func() bool { return len(b.l2Addrs()) == count })
	t.Logf("%d addresses moved in %v", count, took)
}
