package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/announcer/netlab"
	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// chainBGPBar is how long the client may go without an answer when the
// node serving it loses its announcer: the killed announcerd's BGP session
// closes (FIN from the kernel), FRR withdraws its path at once and
// forwards to the others. A second, for a machine under load.
const chainBGPBar = time.Second

// chainL2Bar is the L2 failover bar of the design: another node answers
// ARP for the address within a second of its owner's announcer dying. It
// also bounds how long the owner may go silent while a replica dies.
const chainL2Bar = time.Second

// chainL2EtcdBar bounds how long the owner may go silent on ARP while etcd
// elects a new leader: its right to answer is renewed through etcd, and
// lapses if the election outlasts it (measured: up to 0.9 s; see
// docs/reliability.md). The owner never changes meanwhile.
const chainL2EtcdBar = 2 * time.Second

// chainManifests are what a user applies: MetalLB's resources for FRR and
// a LoadBalancer Service (dual-stack would need a dual-stack service CIDR:
// IPv4 only here).
const chainManifests = `apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: web, namespace: metallb-system}
spec:
  addresses: ["203.0.113.0/28"]
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: frr, namespace: metallb-system}
spec: {myASN: 64512, peerASN: 64512, peerAddress: 192.0.2.1, holdTime: 3s, keepaliveTime: 1s, connectTime: 1s}
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: web, namespace: metallb-system}
spec:
  ipAddressPools: [web]
  communities: ["65000:300"]
  localPref: 150
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: web, namespace: metallb-system}
spec:
  ipAddressPools: [web]
  interfaces: [eth0]
`

func chainService(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %s, namespace: default}
spec:
  type: LoadBalancer
  ports: [{port: 8080}]
`, name)
}

// TestWholeChain runs the production shape in network namespaces: a
// 3-member etcd cluster, two IPAM replicas on it, a real kube-apiserver
// (with its own etcd, as a cluster has) and the k8s-adapter, three
// announcers in node namespaces peering with FRR, and a client that
// reaches the Service's address through FRR. Then it breaks things and
// checks what FRR and the client see (see docs/reliability.md).
func TestWholeChain(t *testing.T) {
	requireLab(t, netlab.FRRBgpd, netlab.FRRZebra, "vtysh", "arping")
	etcdBin := requireEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := binDir(t)
	c := newCluster(t, e2e.Options{Nodes: 3, Replicas: 2, EtcdBin: etcdBin, EtcdMembers: 3})
	frr, err := c.StartFRR(ctx, e2e.NodeASN, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	// FRR forwards the client's packets to the nodes (and sends no
	// redirects that would let the client bypass it).
	for _, s := range []string{"net.ipv4.ip_forward=1", "net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.eth0.send_redirects=0"} {
		if _, err := frr.Host().Run(ctx, "sysctl", "-qw", s); err != nil {
			t.Fatal(err)
		}
	}
	kube, err := e2e.StartKube(ctx, c.Ctl, filepath.Join(c.Lab.Dir(), "kube"))
	if errors.Is(err, e2e.ErrNoEtcd) && os.Getenv("BEACON_TESTBINS_REQUIRED") == "" {
		t.Skipf("SKIPPED %s: %v (make test-integration builds it)", t.Name(), err)
	}
	if err != nil {
		t.Fatal(err)
	}
	crds, err := filepath.Abs("../../deploy/k8s/crds")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.Kubectl(ctx, "apply", "-f", crds); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"); err != nil {
		t.Fatal(err)
	}
	var nodes strings.Builder
	nodes.WriteString("apiVersion: v1\nkind: Namespace\nmetadata: {name: metallb-system}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: beacon-system}\n")
	for _, n := range c.Nodes {
		fmt.Fprintf(&nodes, "---\napiVersion: v1\nkind: Node\nmetadata: {name: %s}\n", n.Name)
	}
	must(t, kube.Apply(ctx, "cluster", nodes.String()))
	replicas := e2e.ReplicaAddr(0).String() + "," + e2e.ReplicaAddr(1).String()
	must(t, kube.StartAdapter(bin, e2e.Tenant, replicas))
	gw, err := e2e.StartGateway(ctx, c.Ctl, bin, replicas, filepath.Join(c.Lab.Dir(), "gateway"))
	if err != nil {
		t.Fatal(err)
	}

	// Every node serves TCP 8080 on any local address, answering its name;
	// the client routes the pool through FRR. The nodes' kernels answer ARP
	// only for eth0's own addresses (arp_ignore=1, as kube-proxy's IPVS
	// mode asks), so that the Service's address, on every node's lo, is
	// answered on the segment by the announcer that owns it alone.
	for _, n := range c.Nodes {
		serveName(t, n)
		for _, s := range []string{"net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.eth0.arp_ignore=1"} {
			if _, err := n.Host.Run(ctx, "sysctl", "-qw", s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := c.Client.Run(ctx, "ip", "route", "add", "203.0.113.0/28", "via", e2e.FRRAddr4.String()); err != nil {
		t.Fatal(err)
	}

	// 1. kubectl apply: the address in the Service's status, in FRR's
	// table from every node with the advertisement's attributes, answered.
	start := time.Now()
	must(t, kube.Apply(ctx, "metallb", chainManifests))
	must(t, kube.Apply(ctx, "web", chainService("web")))
	vip := waitIngress(ctx, t, kube, "web")
	t.Logf("step 1: web got %s %v after apply", vip, time.Since(start).Round(time.Millisecond))
	for _, n := range c.Nodes {
		if _, err := n.Host.Run(ctx, "ip", "addr", "add", vip.String()+"/32", "dev", "lo"); err != nil {
			t.Fatal(err)
		}
	}
	prefix := e2e.HostPrefix(vip)
	all := []netip.Addr{e2e.NodeAddr4(0), e2e.NodeAddr4(1), e2e.NodeAddr4(2)}
	if err := e2e.WaitNextHops(ctx, frr, prefix, 30*time.Second, all...); err != nil {
		t.Fatal(err)
	}
	p, err := netlab.WaitPath(ctx, frr, prefix, 5*time.Second, func(p netlab.Path) error {
		if p.LocalPref != 150 || !containsStr(p.Communities, "65000:300") {
			return fmt.Errorf("path %s: want local-pref 150 and community 65000:300", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("step 1: FRR has %s", p)
	served, err := reach(ctx, c, vip)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("step 1: the client reaches %s through FRR, served by %s", vip, served)
	owner, err := c.WaitL2Owner(ctx, 10*time.Second, vip)
	if err != nil {
		t.Fatal(err)
	}
	macs, err := c.Arping(ctx, vip, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(macs) == 0 {
		t.Fatalf("step 1: nothing answers ARP for %s on the segment", vip)
	}
	for _, m := range macs {
		if m.String() != owner.MAC.String() {
			t.Errorf("step 1: ARP for %s answered by %s, want only the owner %s (%s)", vip, m, owner.Name, owner.MAC)
		}
	}
	t.Logf("step 1: %s answered on the segment by %s (%s) alone", vip, owner.Name, owner.MAC)

	prober := startTCPProber(c, netip.AddrPortFrom(vip, 8080), 10*time.Millisecond)
	defer prober.Stop()
	arp, err := c.StartARPProber(vip, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = arp.Stop() }()
	l2 := &l2Watch{arp: arp, owner: owner}
	if l2.withheld, err = owner.Withheld(ctx); err != nil {
		t.Fatal(err)
	}

	// 2. Kill the IPAM replica the adapter and announcers use (both, one
	// after the other): nothing FRR or the client sees changes, and the
	// adapter keeps giving addresses.
	for _, r := range []int{0, 1} {
		watch := e2e.WatchPaths(ctx, frr, prefix, 50*time.Millisecond, all...)
		from := time.Now()
		c.ReplicaProc(r).Kill()
		svc := fmt.Sprintf("replica%d-down", r)
		must(t, kube.Apply(ctx, svc, chainService(svc)))
		got := waitIngress(ctx, t, kube, svc)
		if got == vip {
			t.Errorf("step 2: %s got %s, web's address", svc, got)
		}
		t.Logf("step 2: with replica %d killed, %s got %s after %v", r, svc, got, time.Since(from).Round(time.Millisecond))
		// Wake the old one: it serves again, and nothing moves either.
		must(t, c.StartReplica(ctx, r))
		checkSteady(ctx, t, fmt.Sprintf("step 2 (replica %d)", r), watch, prober, l2, chainL2Bar, from, 3*time.Second)
	}

	// 3. Kill the etcd leader (two of three members remain): the same.
	leader, err := c.EtcdLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watch := e2e.WatchPaths(ctx, frr, prefix, 50*time.Millisecond, all...)
	from := time.Now()
	c.EtcdMember(leader).Kill()
	must(t, kube.Apply(ctx, "etcd-down", chainService("etcd-down")))
	got := waitIngress(ctx, t, kube, "etcd-down")
	t.Logf("step 3: with etcd member %d (the leader) killed, etcd-down got %s after %v", leader, got, time.Since(from).Round(time.Millisecond))
	checkSteady(ctx, t, "step 3", watch, prober, l2, chainL2EtcdBar, from, 3*time.Second)
	// Wake it: it rejoins, and nothing moves either.
	watch = e2e.WatchPaths(ctx, frr, prefix, 50*time.Millisecond, all...)
	from = time.Now()
	must(t, c.RestartEtcdMember(ctx, leader))
	must(t, kube.Apply(ctx, "etcd-back", chainService("etcd-back")))
	got = waitIngress(ctx, t, kube, "etcd-back")
	t.Logf("step 3: etcd member %d back; etcd-back got %s after %v", leader, got, time.Since(from).Round(time.Millisecond))
	checkSteady(ctx, t, "step 3 (member back)", watch, prober, l2, chainL2Bar, from, time.Second)

	// 4. Kill the announcer of the node that owns the address on the
	// segment: another node answers ARP within the L2 bar, FRR drops the
	// victim's path and the client (if that node served it) is served by
	// another within the BGP bar; restart it: its path comes back and the
	// others' never leave.
	victim := owner
	var rest []netip.Addr
	for _, a := range all {
		if a != e2e.NodeAddr4(victim.Index) {
			rest = append(rest, a)
		}
	}
	others := e2e.WatchPaths(ctx, frr, prefix, 50*time.Millisecond, rest...) // records polls without exactly rest: expected while the victim is up
	from = time.Now()
	victim.Kill()
	if err := e2e.WaitNextHops(ctx, frr, prefix, 10*time.Second, rest...); err != nil {
		t.Fatal(err)
	}
	withdrawn := time.Since(from)
	now, err := reach(ctx, c, vip)
	if err != nil {
		t.Fatal(err)
	}
	if now == victim.Name {
		t.Errorf("step 4: still served by %s after its announcer died", now)
	}
	newOwner, err := c.WaitL2Owner(ctx, 10*time.Second, vip)
	if err != nil {
		t.Fatal(err)
	}
	if newOwner == victim {
		t.Fatalf("step 4: %s still reported as the L2 owner", victim.Name)
	}
	var moved time.Duration
	for _, r := range arp.Replies() {
		if r.At.After(from) && r.MAC.String() == newOwner.MAC.String() {
			moved = r.At.Sub(from)
			break
		}
	}
	t.Logf("step 4: ARP for %s answered by %s %v after %s's announcer was killed (served before: %s)", vip, newOwner.Name, moved.Round(time.Millisecond), victim.Name, served)
	if moved == 0 || moved > chainL2Bar {
		t.Errorf("step 4: L2 failover took %v (0: never), over the %v bar", moved, chainL2Bar)
	}
	gap := prober.LongestGap(from, time.Now())
	t.Logf("step 4: %s killed: FRR dropped its path after %v; client outage %v; now served by %s", victim.Name, withdrawn.Round(time.Millisecond), gap.Round(time.Millisecond), now)
	if gap > chainBGPBar {
		t.Errorf("step 4: the client went %v without an answer, over the %v bar", gap, chainBGPBar)
	}
	back := time.Now()
	must(t, victim.Start(ctx))
	if err := e2e.WaitNextHops(ctx, frr, prefix, 20*time.Second, all...); err != nil {
		t.Fatal(err)
	}
	t.Logf("step 4: %s restarted: its path is back after %v", victim.Name, time.Since(back).Round(time.Millisecond))
	_, missed := others.Stop()
	for _, m := range missed {
		// Allowed: the victim's path too (before the kill and after the
		// restart). Not allowed: a survivor's path missing.
		for _, a := range rest {
			if !strings.Contains(m, a.String()) {
				t.Errorf("step 4: %s lost its path while %s restarted: %s", a, victim.Name, m)
			}
		}
	}
	if gap := prober.LongestGap(back, time.Now()); gap > chainBGPBar {
		t.Errorf("step 4: the client went %v without an answer while %s came back", gap, victim.Name)
	}

	// 5. Delete Services while the adapter is down (killed: its Lease
	// must expire), start it again: their addresses are released and
	// withdrawn, no orphan is left in the IPAM.
	kube.Adapter().Kill()
	from = time.Now()
	gone := []string{"replica0-down", "replica1-down"}
	var goneAddrs []netip.Addr
	for _, name := range gone {
		ips, err := kube.ServiceIngress(ctx, "default", name)
		if err != nil || len(ips) != 1 {
			t.Fatalf("step 5: %s: %v %v", name, ips, err)
		}
		goneAddrs = append(goneAddrs, netip.MustParseAddr(ips[0]))
		if _, err := kube.Kubectl(ctx, "delete", "service", name, "--wait=false"); err != nil {
			t.Fatal(err)
		}
	}
	must(t, kube.StartAdapter(bin, e2e.Tenant, replicas))
	waitGone(ctx, t, kube, gone...)
	for _, a := range goneAddrs {
		if err := netlab.WaitNoPath(ctx, frr, e2e.HostPrefix(a), 20*time.Second); err != nil {
			t.Fatalf("step 5: %v", err)
		}
	}
	if owners := gatewayOwners(ctx, t, gw); owners[goneAddrs[0]] != "" || owners[goneAddrs[1]] != "" {
		t.Errorf("step 5: the IPAM still holds a deleted Service's address: %v", owners)
	}
	t.Logf("step 5: %v deleted with the adapter down: released and withdrawn %v after it was killed", gone, time.Since(from).Round(time.Millisecond))

	// 6. Delete the Service: FRR withdraws the route, the client gets no
	// answer, and the address is free again: a new Service gets it.
	prober.Stop()
	deleted := time.Now()
	if _, err := kube.Kubectl(ctx, "delete", "service", "web", "--wait=false"); err != nil {
		t.Fatal(err)
	}
	waitGone(ctx, t, kube, "web")
	if err := netlab.WaitNoPath(ctx, frr, prefix, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("step 6: web gone and its route withdrawn %v after kubectl delete", time.Since(deleted).Round(time.Millisecond))
	if _, err := reach(ctx, c, vip); err == nil {
		t.Error("step 6: the client still reaches the deleted Service's address")
	}
	must(t, kube.Apply(ctx, "again", chainService("again")))
	again := waitIngress(ctx, t, kube, "again")
	if again != vip {
		t.Errorf("step 6: a new Service got %s, want the released %s (the lowest free)", again, vip)
	}

	// 7. Drain the L2 owner of the new Service's address with beaconctl
	// (through the gateway): another node answers ARP before FRR loses the
	// drained node's path (make before break), ARP never goes unanswered,
	// the client is never cut off; undrain: its path comes back.
	if err := e2e.WaitNextHops(ctx, frr, e2e.HostPrefix(again), 20*time.Second, all...); err != nil {
		t.Fatal(err)
	}
	drained, err := c.WaitL2Owner(ctx, 10*time.Second, again)
	if err != nil {
		t.Fatal(err)
	}
	arp7, err := c.StartARPProber(again, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = arp7.Stop() }()
	prober = startTCPProber(c, netip.AddrPortFrom(again, 8080), 10*time.Millisecond)
	defer prober.Stop()
	if err := netlab.Eventually(ctx, 10*time.Second, 10*time.Millisecond, func(context.Context) error {
		if arp7.LastFrom(drained.MAC).IsZero() || prober.LongestGap(time.Now().Add(-50*time.Millisecond), time.Now()) >= 50*time.Millisecond {
			return errors.New("probers not answered yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var remaining []netip.Addr
	for _, a := range all {
		if a != e2e.NodeAddr4(drained.Index) {
			remaining = append(remaining, a)
		}
	}
	from = time.Now()
	if out, err := gw.Beaconctl(ctx, bin, "announcer", "drain", drained.Name, "--tenant", e2e.Tenant); err != nil {
		t.Fatalf("step 7: %v: %s", err, out)
	}
	if err := e2e.WaitNextHops(ctx, frr, e2e.HostPrefix(again), 10*time.Second, remaining...); err != nil {
		t.Fatal(err)
	}
	withdrawnAt := time.Now()
	// The successor is the first other node the prober heard; the IPAM's
	// view (from the nodes' reports) follows.
	var movedAt time.Time
	var successor *e2e.Node
	for _, r := range arp7.Replies() {
		if r.At.After(from) && r.MAC.String() != drained.MAC.String() {
			movedAt, successor = r.At, c.NodeByMAC(r.MAC)
			break
		}
	}
	if successor == nil {
		t.Fatalf("step 7: no other node answered ARP for %s after %s's drain", again, drained.Name)
	}
	err = netlab.Eventually(ctx, 10*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		o, err := c.WaitL2Owner(ctx, time.Second, again)
		if err != nil {
			return err
		}
		if o != successor {
			return fmt.Errorf("the IPAM reports %s as the owner, ARP is answered by %s", o.Name, successor.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("step 7: %v", err)
	}
	if movedAt.IsZero() || movedAt.After(withdrawnAt) {
		t.Errorf("step 7: %s answered ARP at %v, FRR had lost %s's path by %v: not make before break", successor.Name, movedAt.Format("15:04:05.000"), drained.Name, withdrawnAt.Format("15:04:05.000"))
	}
	to := time.Now()
	arpGap := anyGap(arp7.Replies(), from, to)
	tcpGap := prober.LongestGap(from, to)
	t.Logf("step 7: %s drained: ARP answered by %s %v after, FRR without its path by %v; longest ARP gap %v, client's %v",
		drained.Name, successor.Name, movedAt.Sub(from).Round(time.Millisecond), withdrawnAt.Sub(from).Round(time.Millisecond), arpGap.Round(time.Millisecond), tcpGap.Round(time.Millisecond))
	if arpGap > chainL2Bar || tcpGap > chainBGPBar {
		t.Errorf("step 7: a drain cut the address off: ARP gap %v, client gap %v", arpGap, tcpGap)
	}
	if out, err := gw.Beaconctl(ctx, bin, "announcer", "undrain", drained.Name, "--tenant", e2e.Tenant); err != nil {
		t.Fatalf("step 7: %v: %s", err, out)
	}
	if err := e2e.WaitNextHops(ctx, frr, e2e.HostPrefix(again), 20*time.Second, all...); err != nil {
		t.Fatal(err)
	}
	prober.Stop()

	// At the end the IPAM (read through the gateway) holds exactly the
	// remaining Services' addresses, each once, owned by that Service.
	want := map[netip.Addr]string{}
	for _, name := range []string{"etcd-down", "etcd-back", "again"} {
		want[waitIngress(ctx, t, kube, name)] = "default/" + name
	}
	if diff := cmp.Diff(want, gatewayOwners(ctx, t, gw)); diff != "" {
		t.Errorf("the IPAM's allocations differ from the Services' addresses (-Services +IPAM):\n%s", diff)
	}
}

// anyGap is the longest time in [from, to] without an ARP reply from any
// node.
func anyGap(replies []e2e.ARPReply, from, to time.Time) time.Duration {
	last, gap := from, time.Duration(0)
	for _, r := range replies {
		if r.At.Before(from) || r.At.After(to) {
			continue
		}
		gap = max(gap, r.At.Sub(last))
		last = r.At
	}
	return max(gap, to.Sub(last))
}

// gatewayOwners lists the tenant's allocations through the gateway's REST
// API: each address's owner. An address held twice fails the test.
func gatewayOwners(ctx context.Context, t *testing.T, gw *e2e.Gateway) map[netip.Addr]string {
	t.Helper()
	body, err := gw.Get(ctx, "/v1/tenants/"+e2e.Tenant+"/allocations")
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Allocations []struct {
			Owner     string   `json:"owner"`
			Addresses []string `json:"addresses"`
		} `json:"allocations"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	owners := map[netip.Addr]string{}
	for _, a := range resp.Allocations {
		for _, s := range a.Addresses {
			addr, err := netip.ParseAddr(s)
			if err != nil {
				t.Fatal(err)
			}
			if prev, ok := owners[addr]; ok {
				t.Errorf("%s held by %s and %s", addr, prev, a.Owner)
			}
			owners[addr] = a.Owner
		}
	}
	return owners
}

// waitGone waits until the Services are gone from the API server (the
// adapter removed its finalizer).
func waitGone(ctx context.Context, t *testing.T, kube *e2e.Kube, names ...string) {
	t.Helper()
	err := netlab.Eventually(ctx, 40*time.Second, 100*time.Millisecond, func(ctx context.Context) error {
		out, err := kube.Kubectl(ctx, "get", "services", "-n", "default", "-o", "name")
		if err != nil {
			return err
		}
		for _, n := range names {
			if strings.Contains(out, "service/"+n+"\n") {
				return fmt.Errorf("service %s still there (the adapter's finalizer)", n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\nadapter:\n%s", err, kube.Adapter().Tail(40))
	}
}

// checkSteady stops watch and fails the test if FRR's paths ever differed
// from all nodes, or if the client went longer than bar without an answer
// since from.
func checkSteady(ctx context.Context, t *testing.T, step string, watch *e2e.PathWatch, prober *tcpProber, l2 *l2Watch, l2Bar time.Duration, from time.Time, settle time.Duration) {
	t.Helper()
	// Keep watching a little past the fault, for late effects.
	select {
	case <-ctx.Done():
	case <-time.After(settle):
	}
	polls, missed := watch.Stop()
	if len(missed) > 0 {
		t.Errorf("%s: FRR's paths changed in %d of %d polls: %v", step, len(missed), polls, missed)
	}
	gap := prober.LongestGap(from, time.Now())
	t.Logf("%s: %d FRR polls unchanged, client's longest gap %v", step, polls-len(missed), gap.Round(time.Millisecond))
	if gap > chainBGPBar {
		t.Errorf("%s: the client went %v without an answer", step, gap)
	}
	to := time.Now()
	if macs := l2.arp.MACsBetween(from, to); len(macs) != 1 || macs[0] != l2.owner.MAC.String() {
		t.Errorf("%s: ARP answered by %v, want only %s (%s)", step, macs, l2.owner.Name, l2.owner.MAC)
	}
	l2gap := l2.arp.LongestGap(l2.owner.MAC, from, to)
	withheld, err := l2.owner.Withheld(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: ARP answered by %s alone, longest gap %v, %d replies withheld (its right lapsed)", step, l2.owner.Name, l2gap.Round(time.Millisecond), withheld-l2.withheld)
	l2.withheld = withheld
	if l2gap > l2Bar {
		t.Errorf("%s: %s did not answer ARP for %v, over %v", step, l2.owner.Name, l2gap, l2Bar)
	}
}

// l2Watch is the ARP prober on the segment and the node expected to
// answer it.
type l2Watch struct {
	arp      *e2e.ARPProber
	owner    *e2e.Node
	withheld int // the owner's withheld replies at the last check
}

// waitIngress waits until Service name has one address in its status.
func waitIngress(ctx context.Context, t *testing.T, kube *e2e.Kube, name string) netip.Addr {
	t.Helper()
	var addr netip.Addr
	err := netlab.Eventually(ctx, 30*time.Second, 100*time.Millisecond, func(ctx context.Context) error {
		ips, err := kube.ServiceIngress(ctx, "default", name)
		if err != nil {
			return err
		}
		if len(ips) != 1 {
			return fmt.Errorf("service %s: ingress %v", name, ips)
		}
		addr, err = netip.ParseAddr(ips[0])
		return err
	})
	if err != nil {
		t.Fatalf("%v\nadapter:\n%s", err, kube.Adapter().Tail(30))
	}
	return addr
}

// serveName listens on TCP 8080 in n's namespace (any local address) and
// answers each connection with the node's name, until the test ends.
func serveName(t *testing.T, n *e2e.Node) {
	t.Helper()
	var l net.Listener
	err := e2e.InNamespace(n.Host.NS, func() error {
		var err error
		l, err = net.Listen("tcp", ":8080")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(conn, n.Name)
			_ = conn.Close()
		}
	}()
}

// reach connects from the client to addr:8080 and returns the name of the
// node that answered.
func reach(ctx context.Context, c *e2e.Cluster, addr netip.Addr) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := e2e.DialerIn(c.Client.NS)(cctx, netip.AddrPortFrom(addr, 8080).String())
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	b, err := io.ReadAll(conn)
	if err != nil {
		return "", err
	}
	if len(b) == 0 {
		return "", errors.New("empty answer")
	}
	return string(b), nil
}

// tcpProber connects from the client to a target every interval and
// records when an answer came.
type tcpProber struct {
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	mu       sync.Mutex
	answers  []time.Time
}

func startTCPProber(c *e2e.Cluster, target netip.AddrPort, interval time.Duration) *tcpProber {
	p := &tcpProber{stop: make(chan struct{}), done: make(chan struct{})}
	dial := e2e.DialerIn(c.Client.NS)
	go func() {
		defer close(p.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
			conn, err := dial(ctx, target.String())
			cancel()
			if err == nil {
				_ = conn.SetDeadline(time.Now().Add(250 * time.Millisecond))
				if b, err := io.ReadAll(conn); err == nil && len(b) > 0 {
					p.mu.Lock()
					p.answers = append(p.answers, time.Now())
					p.mu.Unlock()
				}
				_ = conn.Close()
			}
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// Stop ends the probes (again: nothing).
func (p *tcpProber) Stop() {
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
}

// LongestGap is the longest time between answers (or from `from` to the
// first, or from the last to `to`) within [from, to].
func (p *tcpProber) LongestGap(from, to time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gap time.Duration
	last := from
	for _, a := range p.answers {
		if a.Before(from) || a.After(to) {
			continue
		}
		gap = max(gap, a.Sub(last))
		last = a
	}
	return max(gap, to.Sub(last))
}

func containsStr(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
