package scalebench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/beaconlb/beacon/pkg/grpcserve"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/bench"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// livePrefix begins the addresses of the live pool, which the feed's
// allocations come from.
const livePrefix = "198.51.100."

// keepSubscribed runs s until ctx is done, subscribing again, as an
// announcer does, when the stream ends (the replica's lease lost while
// this machine was too busy to keep it alive). It subscribes with the labels
// and interfaces the node is registered with (a node that comes back as it
// was changes no plan but its own).
func keepSubscribed(ctx context.Context, s *bench.Subscriber, conn *grpc.ClientConn, tenant, node string, labels map[string]string) {
	hello := &ipamv1.SubscribeHello{
		Parent: "tenants/" + tenant, Node: node, Labels: labels,
		Interfaces: []*ipamv1.NetworkInterface{{Name: "eth0", Up: true}},
	}
	for ctx.Err() == nil {
		_ = s.Run(ctx, conn, hello) // subscribed again below
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// measureFeed serves the state from a replica over gRPC on loopback,
// subscribes t00's nodes, and times allocations from their commit to every
// subscriber (see the part's comment).
func measureFeed(ctx context.Context, client *store.Client, logger *slog.Logger, sz planSize, quick bool, row *planRow) error {
	rep := replica.New(client, logger, replica.Options{Heartbeat: 5 * time.Second, EtcdCallTimeout: loadTimeout})
	if err := rep.Load(ctx); err != nil {
		return fmt.Errorf("load replica: %w", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gs := grpc.NewServer(grpcserve.ServerOptions()...)
	rep.Register(gs)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { _ = rep.Run(runCtx) })
	wg.Go(func() { _ = gs.Serve(lis) })
	subCtx, stopSubs := context.WithCancel(ctx)
	var subs sync.WaitGroup
	defer func() {
		rep.StopStreams() // as ipamd: sessions leave their registrations to expire with the replica lease
		stopSubs()
		subs.Wait()
		gs.Stop()
		cancel()
		wg.Wait()
	}()

	conns := make([]*grpc.ClientConn, (sz.nodes+99)/100)
	for i := range conns {
		if conns[i], err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			return err
		}
		defer func() { _ = conns[i].Close() }()
	}
	list := make([]*bench.Subscriber, sz.nodes)
	for i := range list {
		s := bench.NewSubscriber()
		s.SnapshotPrefix = livePrefix
		list[i] = s
		subs.Go(func() {
			keepSubscribed(subCtx, s, conns[i%len(conns)], planTenant, nodeName(i), planNode(planTenant, i).Labels)
		})
	}
	deadline := time.After(5 * time.Minute)
	for _, s := range list {
		select {
		case <-s.Synced():
		case <-deadline:
			return errors.New("subscribers not synced after 5 minutes")
		}
	}
	time.Sleep(2 * time.Second) // the registrations' own plan changes handed out

	allocs := ipamv1.NewAllocationServiceClient(conns[0])
	n := 30
	if quick {
		n = 15
	}
	var delays []time.Duration
	c0 := cpuTime()
	for i := range n {
		resp, err := allocs.Allocate(ctx, &ipamv1.AllocateRequest{Parent: "tenants/" + planTenant, Allocation: &ipamv1.Allocation{
			Owner: fmt.Sprintf("feed-%d", i), RequestedPool: "pools/live"}})
		if err != nil {
			return fmt.Errorf("allocate: %w", err)
		}
		done := time.Now()
		prefix := resp.GetAllocation().GetAddresses()[0] + "/32"
		limit := time.After(time.Minute)
		var worst time.Duration
		for _, s := range list {
			for {
				if t, ok := s.At(prefix); ok {
					worst = max(worst, t.Sub(done))
					break
				}
				select {
				case <-s.Arrived():
				case <-time.After(5 * time.Millisecond):
				case <-limit:
					return fmt.Errorf("%s did not reach every subscriber in a minute", prefix)
				}
			}
		}
		delays = append(delays, worst)
	}
	row.feedCPU = (cpuTime() - c0) / time.Duration(n)
	slices.Sort(delays)
	row.feedP50, row.feedP99 = bench.Percentile(delays, 50), bench.Percentile(delays, 99)
	return nil
}
