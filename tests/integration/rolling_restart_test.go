package integration

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/announcer/netlab"
	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// A rolling restart of every IPAM replica (three sharing one etcd; each
// sent SIGTERM, started again and waited for) while the announcers are
// subscribed withdraws nothing: FRR keeps both nodes' paths without an
// UPDATE or a dropped session, and the L2 owner stays the only node
// answering ARP and never withholds a reply for want of a right: the
// announcers move to another replica at once. Then the same with SIGKILL:
// still no route withdrawn.
func TestRollingRestartKeepsAnnouncements(t *testing.T) {
	requireLab(t, netlab.FRRBgpd, "vtysh", "ping")
	etcd := requireEtcd(t)
	c := newCluster(t, e2e.Options{Nodes: 2, Replicas: 3, EtcdBin: etcd})
	ctx := context.Background()
	lab, err := c.SetupRestartLab(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := lab.RollingRestart(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d restarts in %v; %d announcer sessions moved; %d FRR polls; longest gap in the owner's ARP replies %v",
		out.Restarts, out.Took.Round(time.Millisecond), out.Resubscribed, out.Polls, out.LongestARPGap.Round(time.Millisecond))
	if len(out.PathGaps) > 0 {
		t.Errorf("FRR's paths for %s changed in %d of %d polls: %v", lab.Prefix, len(out.PathGaps), out.Polls, out.PathGaps)
	}
	if out.Updates != 0 || out.SessionDrops != 0 {
		t.Errorf("FRR received %d UPDATEs and dropped %d sessions during the rolling restart, want none", out.Updates, out.SessionDrops)
	}
	if len(out.WrongMACs) > 0 || out.OwnerMoved {
		t.Errorf("L2 owner changes: other MACs answering ARP %v, owner moved %v; want only %s's %s", out.WrongMACs, out.OwnerMoved, lab.L2.Owner.Name, lab.L2.Owner.MAC)
	}
	if out.Resubscribed == 0 {
		t.Errorf("no announcer session was on a restarted replica: the test proved nothing")
	}
	// The owner keeps its right to answer throughout: the stopping
	// replica's farewell right covers the move to another replica. (A gap
	// in its replies with nothing withheld is this machine's scheduling.)
	if out.Withheld != 0 {
		t.Errorf("the L2 owner withheld %d ARP replies or announcements for want of a right during the rolling restart (longest gap in its replies %v)", out.Withheld, out.LongestARPGap.Round(time.Millisecond))
	}

	// Crashes too (SIGKILL: no farewell, and the dead replica's lease,
	// which its nodes' registrations were tied to, runs out 2 s later) withdraw no route: routes are
	// the announcers' until a plan changes them. The owner may withhold
	// replies for a moment (its last right ends 0.4 s after its last
	// acknowledged heartbeat, and it answers again once another replica
	// acknowledges one; see "L2 ownership" in docs/announcement.md). Owner
	// changes are logged, not failed: once in about 65 rounds of crashing
	// all three replicas one after another on this loaded machine, the
	// owner stopped answering for 1.1 s and moved (see docs/reliability.md).
	out, err = lab.RollingKill(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d crashes in %v; %d announcer sessions moved; %d replies withheld; longest gap in the owner's ARP replies %v; L2 owner changes %d (other MACs %v, owner moved %v)",
		out.Restarts, out.Took.Round(time.Millisecond), out.Resubscribed, out.Withheld, out.LongestARPGap.Round(time.Millisecond), out.L2OwnerChanges(), out.WrongMACs, out.OwnerMoved)
	if out.L2OwnerChanges() > 0 {
		// Material for the open question in docs/reliability.md.
		for _, p := range c.Lab.Procs() {
			t.Logf("---- after an L2 owner change on replica crashes: %s (pid %d) ----\n%s", p.Name, p.PID, p.Tail(80))
		}
	}
	if out.RouteWithdrawals() != 0 {
		t.Errorf("replica crashes: FRR saw %d UPDATEs, %d dropped sessions and %d polls without a path (%v), want none", out.Updates, out.SessionDrops, len(out.PathGaps), out.PathGaps)
	}
}

// requireEtcd returns the etcd test binary, or skips the test loudly when
// it is missing (fails instead under BEACON_TESTBINS_REQUIRED).
func requireEtcd(t *testing.T) string {
	t.Helper()
	bin, err := e2e.EtcdBinary()
	if errors.Is(err, e2e.ErrNoEtcd) && os.Getenv("BEACON_TESTBINS_REQUIRED") == "" {
		t.Skipf("SKIPPED %s: %v (make test-integration builds it)", t.Name(), err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
