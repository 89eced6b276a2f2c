package integration

import (
	"context"
	"testing"
	"time"

	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// An owner that is frozen or cut off from the IPAM, and comes back after
// the IPAM has moved its addresses, answers for none of them: not the
// requests that queued in its sockets while it was frozen, not the ones it
// sees while cut off, not the client's re-resolution of an entry that
// expired meanwhile. Its right to answer ran out before the IPAM could move
// the addresses, and comes back only with the IPAM's word on its new plan.
//
// Each trial silences the current owner with an ARP prober asking every
// 2 ms and the client re-resolving both addresses, and counts the old
// owner's replies after another node first answered, and whether the
// client's entries ever went back to it. A 0.3 s silence is shorter than the
// IPAM's heartbeat watchdog (0.6 s): usually nothing moves.
func TestL2NoStaleAnswersAfterSilence(t *testing.T) {
	requireLab(t, "ping", "tc")
	c := newCluster(t, e2e.Options{Nodes: 3})
	ctx := context.Background()
	svc, err := c.SetupL2(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range e2e.StaleSilences() {
		res, err := c.MeasureStale(ctx, svc, tr.Kind, tr.For)
		if err != nil {
			t.Fatalf("%s %v: %v", tr.Kind, tr.For, err)
		}
		t.Logf("%s %v: %s -> %s, moved after %v, %d stale replies, client wrong for %v, back to the old owner %d times",
			tr.Kind, tr.For, res.From, res.To, res.Moved, res.StaleReplies, res.WrongOwner, res.BackToOld)
		// A silence of a second or more outlasts the watchdog: the
		// addresses must move. A shorter one usually does not, but on a
		// loaded machine the heartbeats around it may be late enough that
		// they do; either way, nobody may answer stale.
		if tr.For >= time.Second && res.Moved == 0 {
			t.Errorf("%s %v: the addresses did not move", tr.Kind, tr.For)
		}
		if res.StaleReplies != 0 {
			t.Errorf("%s %v: the old owner %s sent %d ARP replies after %s first answered", tr.Kind, tr.For, res.From, res.StaleReplies, res.To)
		}
		if res.BackToOld != 0 {
			t.Errorf("%s %v: the client's entries went back to the old owner %d times", tr.Kind, tr.For, res.BackToOld)
		}
		if res.WrongOwner > 100*time.Millisecond {
			t.Errorf("%s %v: the client's entry pointed at a node that did not own the address for %v", tr.Kind, tr.For, res.WrongOwner)
		}
	}
}
