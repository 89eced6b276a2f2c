package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/replica"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// Fan-out: how long one allocation takes to reach every subscribed
// announcer. Each subscriber is an in-process gRPC client playing an
// announcer; a BGP advertisement makes every node announce every address,
// so each allocation changes every node's plan.
const (
	fanoutTenant = "fanout"
	fanoutNodes  = 1000
	fanoutAllocs = 30
)

// Subscriber plays one announcer over a real gRPC stream and notes when
// each route prefix first reaches it.
type Subscriber struct {
	// SnapshotPrefix, if set, also counts the routes of a snapshot whose
	// prefix begins with it as arrived (a subscriber that subscribed again
	// may get the measured routes in its snapshot).
	SnapshotPrefix string

	mu       sync.Mutex
	seen     map[string]time.Time // prefix -> arrival
	arrived  chan struct{}
	synced   chan struct{}
	syncOnce sync.Once
}

// NewSubscriber returns a Subscriber that has received nothing.
func NewSubscriber() *Subscriber {
	return &Subscriber{seen: map[string]time.Time{}, arrived: make(chan struct{}, 1), synced: make(chan struct{})}
}

// Arrived is signaled (without queueing) each time a message arrives.
func (s *Subscriber) Arrived() <-chan struct{} { return s.arrived }

// Synced is closed once the first message of any stream arrived.
func (s *Subscriber) Synced() <-chan struct{} { return s.synced }

// Run subscribes with hello (see Subscribe) and notes arrivals until the
// stream ends; it returns nil then, as a benchmark ends its streams.
func (s *Subscriber) Run(ctx context.Context, conn grpc.ClientConnInterface, hello *ipamv1.SubscribeHello) error {
	stream, err := Subscribe(ctx, conn, hello)
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return nil //nolint:nilerr // the stream ends when the benchmark is done
		}
		now := time.Now()
		s.syncOnce.Do(func() { close(s.synced) })
		s.mu.Lock()
		for _, r := range resp.GetChange().GetUpsertRoutes() {
			if _, ok := s.seen[r.GetPrefix()]; !ok {
				s.seen[r.GetPrefix()] = now
			}
		}
		if s.SnapshotPrefix != "" {
			for _, r := range resp.GetSnapshot().GetRoutes() {
				if _, ok := s.seen[r.GetPrefix()]; !ok && strings.HasPrefix(r.GetPrefix(), s.SnapshotPrefix) {
					s.seen[r.GetPrefix()] = now
				}
			}
		}
		s.mu.Unlock()
		select {
		case s.arrived <- struct{}{}:
		default:
		}
	}
}

// At returns when prefix first arrived.
func (s *Subscriber) At(prefix string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.seen[prefix]
	return t, ok
}

// fanout measures the feed: BENCH feed_fanout_1000_p99 / _p50 (ms, over
// every subscriber and allocation), feed_fanout_1000_max (ms), and
// feed_bytes_per_subscription (heap growth of the whole process, server
// and in-process clients together, per subscription).
func fanout(ctx context.Context, client *store.Client, log io.Writer) ([]Figure, error) {
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	node, err := startBeacon(ctx, client, logger, replica.Options{Heartbeat: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	defer func() { _ = node.stop() }()
	pools := ipamv1.NewPoolServiceClient(node.conn)
	if _, err := pools.CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: "fanout", Pool: &ipamv1.Pool{
		Ranges: []string{"198.51.100.0/24"}, Tenants: []string{fanoutTenant},
	}}); err != nil {
		return nil, fmt.Errorf("fanout pool: %w", err)
	}
	ann := ipamv1.NewAnnouncementServiceClient(node.conn)
	if _, err := ann.CreateBGPPeer(ctx, &ipamv1.CreateBGPPeerRequest{Parent: "tenants/" + fanoutTenant, BgpPeerId: "r1", BgpPeer: &ipamv1.BGPPeer{
		MyAsn: 64500, PeerAsn: 64501, PeerAddress: "192.0.2.1",
	}}); err != nil {
		return nil, err
	}
	if _, err := ann.CreateBGPAdvertisement(ctx, &ipamv1.CreateBGPAdvertisementRequest{Parent: "tenants/" + fanoutTenant, BgpAdvertisementId: "all", BgpAdvertisement: &ipamv1.BGPAdvertisement{
		Pools: []string{"pools/fanout"},
	}}); err != nil {
		return nil, err
	}

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	// 10 connections of 100 streams each.
	conns := make([]*grpc.ClientConn, 10)
	for i := range conns {
		if conns[i], err = grpc.NewClient(node.conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			return nil, err
		}
		defer func() { _ = conns[i].Close() }()
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	subs := make([]*Subscriber, fanoutNodes)
	var wg sync.WaitGroup
	for i := range subs {
		s := NewSubscriber()
		subs[i] = s
		wg.Go(func() {
			_ = s.Run(sctx, conns[i%len(conns)], &ipamv1.SubscribeHello{
				Parent: "tenants/" + fanoutTenant, Node: fmt.Sprintf("node-%04d", i),
				Interfaces: []*ipamv1.NetworkInterface{{Name: "eth0", Up: true, Addresses: []string{"192.0.2.10/24"}}},
			})
		})
	}
	deadline := time.After(60 * time.Second)
	for _, s := range subs {
		select {
		case <-s.Synced():
		case <-deadline:
			return nil, fmt.Errorf("fanout: subscribers not synced after 60s")
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	perSub := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / fanoutNodes
	fmt.Fprintf(log, "== fan-out: %d subscribers synced; heap %.1f KB per subscription\n", fanoutNodes, perSub/1024)

	var delays []time.Duration
	var worst time.Duration
	for i := range fanoutAllocs {
		resp, err := node.allocs.Allocate(ctx, &ipamv1.AllocateRequest{Parent: "tenants/" + fanoutTenant, Allocation: &ipamv1.Allocation{Owner: fmt.Sprintf("svc-%d", i), RequestedPool: "pools/fanout"}})
		if err != nil {
			return nil, fmt.Errorf("fanout allocate: %w", err)
		}
		done := time.Now()
		prefix := resp.GetAllocation().GetAddresses()[0] + "/32"
		limit := time.After(10 * time.Second)
		for _, s := range subs {
			for {
				if t, ok := s.At(prefix); ok {
					d := max(t.Sub(done), 0)
					delays = append(delays, d)
					worst = max(worst, d)
					break
				}
				select {
				case <-s.Arrived():
				case <-time.After(5 * time.Millisecond):
				case <-limit:
					return nil, fmt.Errorf("fanout: %s did not reach every subscriber in 10s", prefix)
				}
			}
		}
	}
	cancel()
	wg.Wait()
	slices.Sort(delays)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	fmt.Fprintf(log, "== fan-out: %d allocations x %d subscribers: p50 %v p99 %v max %v\n", fanoutAllocs, fanoutNodes, Percentile(delays, 50), Percentile(delays, 99), worst)
	return []Figure{
		{"feed_fanout_1000_p50", ms(Percentile(delays, 50)), "ms"},
		{"feed_fanout_1000_p99", ms(Percentile(delays, 99)), "ms"},
		{"feed_fanout_1000_max", ms(worst), "ms"},
		{"feed_bytes_per_subscription", perSub, "bytes"},
	}, nil
}

// Subscribe opens an announcer's stream as an in-process client over conn:
// it sends hello and then a heartbeat every second until ctx is done, as a
// minimal announcer does. The caller receives.
func Subscribe(ctx context.Context, conn grpc.ClientConnInterface, hello *ipamv1.SubscribeHello) (ipamv1.AnnouncerService_SubscribeClient, error) {
	stream, err := ipamv1.NewAnnouncerServiceClient(conn).Subscribe(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Hello{Hello: hello}}); err != nil {
		return nil, err
	}
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = stream.Send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Heartbeat{Heartbeat: &ipamv1.Heartbeat{}}})
			}
		}
	}()
	return stream, nil
}
