package integration

import (
	"context"
	"testing"
	"time"

	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// The design's bar: a client's neighbour entry points at the new node
// within a second of the owner's death.
const failoverBar = time.Second

// failover runs trials of kind on a fresh two-node cluster and returns the
// outages.
func failover(t *testing.T, kind e2e.FailoverKind, trials int) e2e.Samples {
	t.Helper()
	return failoverIn(t, e2e.Options{Nodes: 2}, kind, trials)
}

// failoverIn is failover on a cluster built with opts.
func failoverIn(t *testing.T, opts e2e.Options, kind e2e.FailoverKind, trials int) e2e.Samples {
	t.Helper()
	requireLab(t, "ping")
	c := newCluster(t, opts)
	ctx := context.Background()
	svc, err := c.SetupL2(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.MeasureFailover(ctx, svc, kind, trials)
	if err != nil {
		t.Fatal(err)
	}
	s := e2e.Outages(res)
	t.Logf("%s: client outage %v", kind, s)
	return s
}

// SIGKILL of the owning announcerd: its IPAM session breaks, the other
// node takes the addresses and announces them; the client's IPv4 and IPv6
// entries follow. Outage: kill until both entries point at the new node.
func TestL2FailoverKill(t *testing.T) {
	s := failover(t, e2e.Kill, 20)
	if p := s.Percentile(99); p > failoverBar {
		t.Errorf("p99 outage %v > %v", p, failoverBar)
	}
}

// The owner's eth0 goes down; its announcer (still connected over eth1)
// reports the interface, and the IPAM moves the addresses to a node with
// eth0 up.
func TestL2FailoverLinkDown(t *testing.T) {
	s := failover(t, e2e.LinkDown, 20)
	if p := s.Percentile(99); p > failoverBar {
		t.Errorf("p99 outage %v > %v", p, failoverBar)
	}
}

// The owner's eth0 goes down, and the nodes reach the IPAM over eth0 too:
// the announcer can report nothing, and the addresses move only when the
// IPAM's heartbeat watchdog (3 × 200 ms) ends its session. The bar is the
// grace period (2 s), after which the old owner stops answering anyway.
func TestL2FailoverLinkDownSameLink(t *testing.T) {
	s := failoverIn(t, e2e.Options{Nodes: 2, IPAMOverDataLink: true}, e2e.LinkDown, 5)
	if p := s.Percentile(99); p > 2*time.Second {
		t.Errorf("p99 outage %v > 2s", p)
	}
}

// DrainAnnouncer moves the addresses make-before-break: the new owner
// announces before the old one stops answering, so the client loses
// (next to) nothing.
func TestL2Drain(t *testing.T) {
	s := failover(t, e2e.Drain, 10)
	if p := s.Percentile(99); p > 200*time.Millisecond {
		t.Errorf("p99 outage %v > 200ms", p)
	}
}

// A node whose Node resource gets node.kubernetes.io/exclude-from-external-
// load-balancers (what the k8s adapter writes for a so labelled Kubernetes
// Node) stops announcing; its addresses move as in a drain, make-before-
// break.
func TestL2Exclude(t *testing.T) {
	s := failover(t, e2e.Exclude, 5)
	if p := s.Percentile(99); p > 200*time.Millisecond {
		t.Errorf("p99 outage %v > 200ms", p)
	}
}

// A hung announcer (SIGSTOP: its connection stays up, its heartbeats stop)
// loses its addresses when the IPAM's heartbeat watchdog (three missed
// 200 ms heartbeats) ends its session.
func TestL2FailoverHang(t *testing.T) {
	s := failover(t, e2e.Hang, 5)
	if p := s.Percentile(99); p > failoverBar {
		t.Errorf("p99 outage %v > %v", p, failoverBar)
	}
}
