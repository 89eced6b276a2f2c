// Command gateway-bench measures whether a noisy tenant slows the others
// down through the gateway. It runs a real ipamd (built with `go build`, or
// $BEACON_BIN/ipamd) with embedded etcd and a real gateway handler on
// loopback TLS, then:
//
//  1. baseline: a quiet tenant reads one of its allocations at a steady
//     pace (GetAllocation over gRPC), alone;
//  2. noisy: the same, while a noisy tenant floods the gateway with
//     ListAllocations from many goroutines, far above its rate limit.
//
// It prints one "BENCH <name> <value> <unit>" line per figure on stdout
// (see docs/gateway.md), progress on stderr, and finishes in under a
// minute with the defaults:
//
//	gateway_noisy_neighbor_latency_ratio  quiet p50 under the flood ÷ quiet p50 alone (goal ≤ 1.2)
//	gateway_rate_limited_fraction         share of the noisy tenant's calls refused by the rate limit
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/beaconlb/beacon/pkg/devcerts"
	"github.com/beaconlb/beacon/pkg/ipamtest"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/gateway/internal/frontdoor"
	"github.com/beaconlb/beacon/services/gateway/internal/proxy"
)

type options struct {
	phase        time.Duration
	quietEvery   time.Duration
	noisyWorkers int
	noisyConns   int
	rateLimit    float64
	rateBurst    int
	refusalHold  time.Duration
	out          string
}

func main() {
	var o options
	fs := flag.NewFlagSet("gateway-bench", flag.ExitOnError)
	fs.DurationVar(&o.phase, "phase", 8*time.Second, "length of each phase (baseline, noisy)")
	fs.DurationVar(&o.quietEvery, "quiet-every", 10*time.Millisecond, "the quiet tenant's pace: one call per this interval")
	fs.IntVar(&o.noisyWorkers, "noisy-workers", 256, "goroutines flooding as the noisy tenant, each calling back to back")
	fs.IntVar(&o.noisyConns, "noisy-conns", 4, "connections the noisy tenant spreads its flood over")
	fs.Float64Var(&o.rateLimit, "rate-limit", 100, "gateway rate limit, calls/s per tenant and role")
	fs.IntVar(&o.rateBurst, "rate-burst", 100, "gateway rate limit burst")
	fs.DurationVar(&o.refusalHold, "refusal-hold", frontdoor.DefaultRefusalHold, "how long the gateway holds a rate-limited call before refusing it (negative: not at all)")
	fs.StringVar(&o.out, "out", "", "also write the BENCH lines to this file")
	_ = fs.Parse(os.Args[1:])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lines, err := bench(ctx, o, os.Stderr)
	for _, l := range lines {
		fmt.Println(l)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway-bench:", err)
		os.Exit(1)
	}
	if o.out != "" {
		f, err := os.OpenFile(o.out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644) //nolint:gosec // a results file
		if err == nil {
			for _, l := range lines {
				fmt.Fprintln(f, l)
			}
			err = f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "gateway-bench:", err)
			os.Exit(1)
		}
	}
}

func bench(ctx context.Context, o options, progress io.Writer) ([]string, error) {
	say := func(format string, args ...any) { fmt.Fprintf(progress, ">> "+format+"\n", args...) }
	tmp, err := os.MkdirTemp("", "gateway-bench-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	say("building ipamd (or using $BEACON_BIN)")
	defer ipamtest.Cleanup()
	ipam, stopIPAM, err := ipamtest.Serve(ctx)
	if err != nil {
		return nil, err
	}
	defer stopIPAM()
	say("ipamd serving on %s", ipam.Addr)

	ca, err := devcerts.NewCA("gateway-bench")
	if err != nil {
		return nil, err
	}
	srvCert, err := ca.ServerTLS()
	if err != nil {
		return nil, err
	}
	backend, err := proxy.DialIPAM([]string{ipam.Addr}, insecure.NewCredentials())
	if err != nil {
		return nil, err
	}
	defer func() { _ = backend.Close() }()
	const bootstrap = "bct_gateway-bench-bootstrap"
	gw, err := frontdoor.New(ctx, frontdoor.Config{
		Backend:         backend,
		TLS:             &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS12},
		BootstrapSecret: bootstrap,
		RateLimit:       o.rateLimit,
		RateBurst:       o.rateBurst,
		RefusalHold:     o.refusalHold,
		Logger:          slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	defer gw.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	sctx, stopServing := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- gw.Serve(sctx, lis) }()
	defer func() {
		stopServing()
		if err := <-served; err != nil {
			fmt.Fprintln(progress, "gateway:", err)
		}
	}()

	dial := func(identity, token string) (*grpc.ClientConn, error) {
		tc := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
		if identity != "" {
			cert, err := ca.ClientTLS(identity)
			if err != nil {
				return nil, err
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tc))}
		if token != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(bearer(token)))
		}
		return grpc.NewClient(lis.Addr().String(), opts...)
	}
	admin, err := dial("", bootstrap)
	if err != nil {
		return nil, err
	}
	defer func() { _ = admin.Close() }()
	if _, err := ipamv1.NewPoolServiceClient(admin).CreatePool(ctx, &ipamv1.CreatePoolRequest{
		PoolId: "bench", Pool: &ipamv1.Pool{Ranges: []string{"2001:db8:80::/112"}},
	}); err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	quietConn, err := dial("beacon://tenant/quiet", "")
	if err != nil {
		return nil, err
	}
	defer func() { _ = quietConn.Close() }()
	quiet := ipamv1.NewAllocationServiceClient(quietConn)
	var target string
	for i := range 20 {
		resp, err := quiet.Allocate(ctx, &ipamv1.AllocateRequest{Parent: "tenants/quiet", Allocation: &ipamv1.Allocation{Owner: fmt.Sprintf("ns/svc-%d", i)}})
		if err != nil {
			return nil, fmt.Errorf("allocate: %w", err)
		}
		target = resp.GetAllocation().GetName()
	}
	noisyConns := make([]ipamv1.AllocationServiceClient, o.noisyConns)
	for i := range noisyConns {
		c, err := dial("beacon://tenant/noisy", "")
		if err != nil {
			return nil, err
		}
		defer func() { _ = c.Close() }()
		noisyConns[i] = ipamv1.NewAllocationServiceClient(c)
	}
	// Let the quiet tenant's bucket refill after the setup.
	time.Sleep(time.Second)

	// quietRun calls GetAllocation at a steady pace for d and returns the
	// latencies.
	quietRun := func(d time.Duration) ([]time.Duration, error) {
		return paced(ctx, quiet, target, o.quietEvery, d)
	}

	direct, err := grpc.NewClient(ipam.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer func() { _ = direct.Close() }()
	say("direct: the same calls straight to ipamd for %v, for comparison", o.phase/2)
	directLat, err := paced(ctx, ipamv1.NewAllocationServiceClient(direct), target, o.quietEvery, o.phase/2)
	if err != nil {
		return nil, err
	}

	// The quiet tenant calls at a steady pace throughout; the noisy one
	// floods in every other slice of time. Alternating (rather than one
	// phase alone, then one noisy) spreads drift in the IPAM's own latency
	// over both. Samples in the first 200ms after a switch are dropped.
	const rounds = 4
	slice := o.phase / rounds
	say("%d rounds of %v alone, then %v while %d goroutines over %d connections flood as another tenant (limit %g/s, burst %d); one quiet GetAllocation every %v",
		rounds, slice, slice, o.noisyWorkers, o.noisyConns, o.rateLimit, o.rateBurst, o.quietEvery)
	var flooding atomic.Bool
	var ok, limited, failed atomic.Int64
	fctx, stopFlood := context.WithCancel(ctx)
	defer stopFlood()
	var wg sync.WaitGroup
	for w := range o.noisyWorkers {
		c := noisyConns[w%len(noisyConns)]
		wg.Go(func() {
			for fctx.Err() == nil {
				if !flooding.Load() {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				_, err := c.ListAllocations(fctx, &ipamv1.ListAllocationsRequest{Parent: "tenants/noisy"})
				switch {
				case err == nil:
					ok.Add(1)
				case status.Code(err) == codes.ResourceExhausted:
					limited.Add(1)
				case fctx.Err() == nil:
					failed.Add(1)
				}
			}
		})
	}
	var base, noisy []time.Duration
	var floodTime time.Duration
	var okN, limitedN int64
	for range rounds {
		for _, on := range []bool{false, true} {
			flooding.Store(on)
			time.Sleep(200 * time.Millisecond) // the switch settles
			ok0, lim0, start := ok.Load(), limited.Load(), time.Now()
			lat, err := quietRun(slice)
			if err != nil {
				return nil, err
			}
			if on {
				noisy = append(noisy, lat...)
				floodTime += time.Since(start)
				okN += ok.Load() - ok0
				limitedN += limited.Load() - lim0
			} else {
				base = append(base, lat...)
			}
		}
	}
	stopFlood()
	wg.Wait()
	if failed.Load() > 0 {
		return nil, fmt.Errorf("%d noisy calls failed with something other than ResourceExhausted", failed.Load())
	}
	if okN+limitedN == 0 {
		return nil, errors.New("the noisy tenant made no calls")
	}

	p50b, p99b := pct(base, 50), pct(base, 99)
	p50n, p99n := pct(noisy, 50), pct(noisy, 99)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	return []string{
		fmt.Sprintf("BENCH gateway_direct_ipam_p50_latency %.1f us", us(pct(directLat, 50))),
		fmt.Sprintf("BENCH gateway_quiet_p50_latency_alone %.1f us", us(p50b)),
		fmt.Sprintf("BENCH gateway_quiet_p99_latency_alone %.1f us", us(p99b)),
		fmt.Sprintf("BENCH gateway_quiet_p50_latency_noisy %.1f us", us(p50n)),
		fmt.Sprintf("BENCH gateway_quiet_p99_latency_noisy %.1f us", us(p99n)),
		fmt.Sprintf("BENCH gateway_noisy_neighbor_latency_ratio %.3f ratio", float64(p50n)/float64(p50b)),
		fmt.Sprintf("BENCH gateway_noisy_calls %.1f calls/s", float64(okN+limitedN)/floodTime.Seconds()),
		fmt.Sprintf("BENCH gateway_noisy_admitted %.1f calls/s", float64(okN)/floodTime.Seconds()),
		fmt.Sprintf("BENCH gateway_rate_limited_fraction %.3f ratio", float64(limitedN)/float64(okN+limitedN)),
	}, nil
}

// paced calls GetAllocation(name) once every interval for d and returns
// the latencies.
func paced(ctx context.Context, c ipamv1.AllocationServiceClient, name string, every, d time.Duration) ([]time.Duration, error) {
	var lat []time.Duration
	tick := time.NewTicker(every)
	defer tick.Stop()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		<-tick.C
		start := time.Now()
		if _, err := c.GetAllocation(ctx, &ipamv1.GetAllocationRequest{Name: name}); err != nil {
			return nil, fmt.Errorf("GetAllocation: %w", err)
		}
		lat = append(lat, time.Since(start))
	}
	return lat, nil
}

// pct returns the p-th percentile of ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }
