package kube_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/beaconlb/beacon/k8s-adapter/internal/kube"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// A node of the tenant reports that another host uses the Service's L2
// address (as announcerd does when its ARP probe is answered): the IPAM's
// allocation gets a Conflict condition and the adapter puts an
// AddressConflict Warning Event on the Service naming the other host's MAC.
// The node is a real announcer session over gRPC to the test's ipamd.
func TestConflictWarningEvent(t *testing.T) {
	e := newEnv(t, nil)
	e.pool("main", &ipamv1.Pool{Ranges: []string{e.v4(0)}})
	e.start(func(c *kube.Config) { c.ConflictPoll = 100 * time.Millisecond })
	e.create(e.svc("web"))
	addr := e.waitIPs("web", 1)[0]

	cc, err := grpc.NewClient(ipamd.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := ipamv1.NewAnnouncerServiceClient(cc).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const other = "02:00:00:00:0b:0b"
	for _, m := range []*ipamv1.SubscribeRequest{
		{Body: &ipamv1.SubscribeRequest_Hello{Hello: &ipamv1.SubscribeHello{
			Parent: "tenants/" + e.tenant, Node: "n1",
			Interfaces: []*ipamv1.NetworkInterface{{Name: "eth0", HardwareAddress: "02:00:00:00:0a:01", Up: true}},
		}}},
		{Body: &ipamv1.SubscribeRequest_Status{Status: &ipamv1.AnnouncerStatus{Conflicts: []*ipamv1.AddressConflict{
			{Address: addr, Interface: "eth0", HardwareAddress: other, BeforeAnswering: true},
		}}}},
	} {
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	go func() { // keep the session alive; the IPAM's messages are not needed
		for {
			if _, err := stream.Recv(); err != nil {
				return
			}
		}
	}()
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if stream.Send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Heartbeat{Heartbeat: &ipamv1.Heartbeat{}}}) != nil {
					return
				}
			}
		}
	}()

	msg := e.waitEvent("web", "AddressConflict")
	for _, want := range []string{other, addr, "does not answer"} {
		if !strings.Contains(msg, want) {
			t.Errorf("event message %q does not mention %q", msg, want)
		}
	}
	a := e.allocation(e.ns + "/web")
	if n := len(a.GetConditions()); n != 1 || a.GetConditions()[0].GetType() != "Conflict" {
		t.Errorf("allocation conditions %v, want one Conflict", a.GetConditions())
	}
}
