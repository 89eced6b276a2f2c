package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/tests/integration/e2e"
)

// Kill-restart test sizes: the pool is full (more owners than addresses)
// and stays so while the clients allocate, renew and release.
const (
	killPool        = "203.0.113.0/28" // 16 addresses; only written to etcd, never sent traffic
	killTenant      = "killtest"
	killClients     = 8
	ownersPerClient = 4
)

// SIGKILLing an IPAM replica (the real ipamd) again and again, each time
// with Allocate, Renew and Release calls of several clients in flight on a
// full pool, reassigns nothing: no owner is ever told a different address
// while it holds one, no address is ever told to two owners, and the
// final state in etcd (read through the API of a replica that loaded it
// afresh) agrees with every answer given, with no address leaked.
//
// Two shapes: three replicas sharing one etcd process (the production
// shape; a replica killed mid-transaction), and one ipamd with its embedded
// etcd (etcd killed with it, mid-commit: what was answered must be on
// disk). BEACON_RESTART_KILLS sets the number of kills of each (default:
// 100 and 25; see docs/reliability.md).
func TestReplicaKillsReassignNothing(t *testing.T) {
	kills := func(def int) int {
		if v, err := strconv.Atoi(os.Getenv("BEACON_RESTART_KILLS")); err == nil && v > 0 {
			return v
		}
		return def
	}
	for _, tc := range []struct {
		name     string
		replicas int
		embedded bool
		kills    int
	}{
		{"three replicas on one etcd", 3, false, kills(100)},
		{"one replica with embedded etcd", 1, true, kills(25)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(binDir(t), "ipamd")
			dir := t.TempDir()
			var shared []string
			if tc.embedded {
				shared = []string{"--data-dir", filepath.Join(dir, "ipamd")}
			} else {
				etcd, err := e2e.StartEtcd(requireEtcd(t), filepath.Join(dir, "etcd"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(etcd.Stop)
				shared = []string{"--etcd-endpoints", etcd.Endpoint}
			}
			shared = append(shared, "--release-hold", "0s")
			runKills(t, bin, shared, tc.replicas, tc.kills)
		})
	}
}

func runKills(t *testing.T, bin string, args []string, n, kills int) {
	ctx := t.Context()
	reps := make([]*replicaProc, n)
	conns := make([]ipamv1.AllocationServiceClient, n)
	for i := range reps {
		reps[i] = &replicaProc{bin: bin, args: args}
		if err := reps[i].start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(reps[i].kill)
		conn, err := grpc.NewClient(reps[i].addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			// A call to a replica that is down waits for it (up to the
			// call's timeout) instead of failing at once.
			grpc.WithDefaultCallOptions(grpc.WaitForReady(true)),
			// The replica comes back on the same address: reconnect quickly.
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, MaxDelay: 200 * time.Millisecond}, MinConnectTimeout: 2 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		conns[i] = ipamv1.NewAllocationServiceClient(conn)
		if i == 0 {
			pools := ipamv1.NewPoolServiceClient(conn)
			if _, err := pools.CreatePool(ctx, &ipamv1.CreatePoolRequest{PoolId: "kill", Pool: &ipamv1.Pool{Ranges: []string{killPool}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var owners []*owner
	for i := range killClients * ownersPerClient {
		owners = append(owners, &owner{id: fmt.Sprintf("ns/svc-%02d", i)})
	}
	led := newLedger(owners)
	// Fill the pool: every owner asks once; those past its size are refused.
	for _, o := range owners {
		led.allocate(ctx, conns[0], o)
	}
	poolSize := led.held()
	if poolSize != 16 {
		t.Fatalf("filled the pool with %d allocations, want 16\n%s", poolSize, strings.Join(led.violations(), "\n"))
	}

	// The clients: each works on its own owners, one call at a time,
	// on a replica picked at random.
	cctx, stopClients := context.WithCancel(ctx)
	inflight := make([]atomic.Int64, n)
	answered := make([]atomic.Int64, n)
	var wg sync.WaitGroup
	for c := range killClients {
		mine := owners[c*ownersPerClient : (c+1)*ownersPerClient]
		rng := rand.New(rand.NewPCG(uint64(c), 1))
		wg.Go(func() {
			for cctx.Err() == nil {
				o, r := mine[rng.IntN(len(mine))], rng.IntN(n)
				inflight[r].Add(1)
				var ok bool
				switch p := rng.IntN(10); {
				case o.releasing:
					ok = led.release(cctx, conns[r], o)
				case !o.addr.IsValid() || p < 4:
					ok = led.allocate(cctx, conns[r], o)
				case p < 8:
					ok = led.renew(cctx, conns[r], o)
				default:
					ok = led.release(cctx, conns[r], o)
				}
				inflight[r].Add(-1)
				if ok {
					answered[r].Add(1)
				}
			}
		})
	}
	defer func() { stopClients(); wg.Wait() }()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	start := time.Now()
	var caught, down time.Duration
	var inflightAtKill int64
	for k := range kills {
		i := rng.IntN(n)
		// Kill while the replica is answering: a few answers from it since
		// it last started, and a call of ours in flight on it right now.
		base := answered[i].Load()
		deadline := time.Now().Add(30 * time.Second)
		for answered[i].Load() < base+3 || inflight[i].Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: replica %d answered %d calls in 30 s, %d in flight\n%s", k, i, answered[i].Load()-base, inflight[i].Load(), reps[i].logTail())
			}
			time.Sleep(time.Millisecond) // polling the counters
		}
		inflightAtKill += inflight[i].Load()
		t0 := time.Now()
		reps[i].kill()
		if err := reps[i].start(); err != nil {
			t.Fatalf("kill %d: %v", k, err)
		}
		down += time.Since(t0)
		caught += t0.Sub(start)
		start = time.Now()
		if v := led.violations(); len(v) > 0 {
			t.Fatalf("after %d kills:\n%s", k+1, strings.Join(v, "\n"))
		}
	}
	stopClients()
	wg.Wait()
	t.Logf("%d kills; each replica down and back serving in %v on average; %d calls of ours in flight at the kills; %s",
		kills, (down / time.Duration(max(kills, 1))).Round(time.Millisecond), inflightAtKill, led.summary())

	// The audit: a replica that loaded the state afresh lists it; then
	// every owner asks once more, and the pool must be full again.
	reps[0].kill()
	if err := reps[0].start(); err != nil {
		t.Fatal(err)
	}
	led.audit(ctx, t, conns[0])
	for _, o := range owners {
		led.allocate(ctx, conns[0], o)
	}
	led.audit(ctx, t, conns[0])
	if got := led.held(); got != poolSize {
		t.Errorf("after every owner asked again, %d owners hold an address; the pool has %d: addresses leaked", got, poolSize)
	}
	if v := led.violations(); len(v) > 0 {
		t.Fatal(strings.Join(v, "\n"))
	}
}

// owner is one allocation owner, worked on by one client at a time.
type owner struct {
	id   string
	name string     // the allocation's resource name, once known
	addr netip.Addr // the address it was last told it holds; invalid: none
	// unsure: a call's outcome is unknown (an error that is no answer), so
	// it may hold an address it was not told of.
	unsure bool
	// releasing: a Release got no answer. It may still be on its way (a
	// call sent to a replica just before its deadline runs there after the
	// caller gave up), and land after a later Allocate was answered with
	// the same allocation: the owner would then hold nothing while told it
	// holds the address. A careful client does what this one does: it
	// sends the Release again until it gets an answer, then goes on.
	releasing bool
}

// ledger checks every answer against the answers before it.
type ledger struct {
	mu     sync.Mutex
	owners map[string]*owner
	holder map[netip.Addr]*owner // who was told it holds each address
	errs   []string
	codes  map[string]int
}

func newLedger(owners []*owner) *ledger {
	l := &ledger{owners: map[string]*owner{}, holder: map[netip.Addr]*owner{}, codes: map[string]int{}}
	for _, o := range owners {
		l.owners[o.id] = o
	}
	return l
}

const killCallTimeout = 5 * time.Second

// allocate asks for o's address; it reports whether an answer came.
func (l *ledger) allocate(ctx context.Context, c ipamv1.AllocationServiceClient, o *owner) bool {
	cctx, cancel := context.WithTimeout(ctx, killCallTimeout)
	defer cancel()
	resp, err := c.Allocate(cctx, &ipamv1.AllocateRequest{Parent: "tenants/" + killTenant, Allocation: &ipamv1.Allocation{
		Owner: o.id, RequestedPool: "pools/kill", Ttl: durationpb.New(time.Hour),
	}})
	switch code := status.Code(err); {
	case err == nil:
		l.told(o, "Allocate", resp.GetAllocation())
		return true
	case code == codes.ResourceExhausted:
		l.none(o, "Allocate", err)
		return true
	default:
		l.unknown(o, "Allocate", err)
		return false
	}
}

// renew renews o's allocation (o holds one, as far as it knows).
func (l *ledger) renew(ctx context.Context, c ipamv1.AllocationServiceClient, o *owner) bool {
	cctx, cancel := context.WithTimeout(ctx, killCallTimeout)
	defer cancel()
	resp, err := c.RenewAllocation(cctx, &ipamv1.RenewAllocationRequest{Name: o.name})
	switch code := status.Code(err); {
	case err == nil:
		l.told(o, "Renew", resp.GetAllocation())
		return true
	case code == codes.NotFound:
		l.none(o, "Renew", err)
		return true
	default:
		l.unknown(o, "Renew", err)
		return false
	}
}

// release frees o's address at once. o stops counting as its holder
// before the call: from then on another owner may be given it.
func (l *ledger) release(ctx context.Context, c ipamv1.AllocationServiceClient, o *owner) bool {
	l.mu.Lock()
	if l.holder[o.addr] == o {
		delete(l.holder, o.addr)
	}
	o.addr, o.unsure = netip.Addr{}, true
	l.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, killCallTimeout)
	defer cancel()
	_, err := c.Release(cctx, &ipamv1.ReleaseRequest{Name: o.name, Hold: durationpb.New(0)})
	l.mu.Lock()
	defer l.mu.Unlock()
	if code := status.Code(err); err == nil || code == codes.NotFound {
		o.unsure, o.releasing = false, false
		l.codes["Release "+code.String()]++
		return true
	}
	o.releasing = true
	l.codes["Release "+status.Code(err).String()]++
	return false
}

// told records an answer that o holds a.
func (l *ledger) told(o *owner, call string, a *ipamv1.Allocation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.codes[call+" OK"]++
	addrs := a.GetAddresses()
	if len(addrs) != 1 || a.GetOwner() != o.id {
		l.errs = append(l.errs, fmt.Sprintf("%s for %s answered %s with %v", call, o.id, a.GetOwner(), addrs))
		return
	}
	addr, err := netip.ParseAddr(addrs[0])
	if err != nil {
		l.errs = append(l.errs, fmt.Sprintf("%s for %s: address %q: %v", call, o.id, addrs[0], err))
		return
	}
	if o.addr.IsValid() && o.addr != addr {
		l.errs = append(l.errs, fmt.Sprintf("REASSIGNED: %s for %s answered %s; it was told %s before and has not released it", call, o.id, addr, o.addr))
	}
	if h := l.holder[addr]; h != nil && h != o {
		l.errs = append(l.errs, fmt.Sprintf("TWO OWNERS: %s for %s answered %s, which %s holds", call, o.id, addr, h.id))
	}
	if l.holder[o.addr] == o {
		delete(l.holder, o.addr)
	}
	l.holder[addr] = o
	o.addr, o.name, o.unsure = addr, a.GetName(), false
}

// none records an answer that o holds nothing.
func (l *ledger) none(o *owner, call string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.codes[call+" "+status.Code(err).String()]++
	if o.addr.IsValid() {
		l.errs = append(l.errs, fmt.Sprintf("LOST: %s for %s: %v; it was told it holds %s and has not released it", call, o.id, err, o.addr))
		if l.holder[o.addr] == o {
			delete(l.holder, o.addr)
		}
	}
	o.addr, o.unsure = netip.Addr{}, false
}

// unknown records a call that got no answer.
func (l *ledger) unknown(o *owner, call string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.codes[call+" "+status.Code(err).String()]++
	if !o.addr.IsValid() {
		o.unsure = true // an Allocate may have made one
	}
}

// held counts the owners told they hold an address.
func (l *ledger) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.holder)
}

func (l *ledger) violations() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

func (l *ledger) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(l.codes))
	for k := range l.codes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("calls:")
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, l.codes[k])
	}
	return b.String()
}

// audit lists every allocation of the tenant and checks them against the
// answers: no address twice, every owner told it holds an address holds
// exactly it, and no owner holds one it was never told of unless a call
// of its got no answer (it then adopts it).
func (l *ledger) audit(ctx context.Context, t *testing.T, c ipamv1.AllocationServiceClient) {
	t.Helper()
	var all []*ipamv1.Allocation
	token := ""
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := c.ListAllocations(cctx, &ipamv1.ListAllocationsRequest{Parent: "tenants/" + killTenant, PageSize: 1000, PageToken: token})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, resp.GetAllocations()...)
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	byOwner := map[string]*owner{}
	for _, o := range l.holder {
		byOwner[o.id] = o
	}
	seen := map[string]string{}
	stored := map[string]string{}
	for _, a := range all {
		for _, s := range a.GetAddresses() {
			if prev, ok := seen[s]; ok {
				t.Errorf("AUDIT: %s is stored for both %s and %s", s, prev, a.GetOwner())
			}
			seen[s] = a.GetOwner()
		}
		stored[a.GetOwner()] = strings.Join(a.GetAddresses(), ",")
	}
	for _, o := range byOwner {
		if got := stored[o.id]; got != o.addr.String() {
			t.Errorf("AUDIT: %s was told it holds %s; etcd has %q", o.id, o.addr, got)
		}
	}
	for _, a := range all {
		if _, ok := byOwner[a.GetOwner()]; ok {
			continue
		}
		// Held by an owner that was not told so: only after a call of its
		// that got no answer. Adopt it, so that the refill counts it.
		o := l.owners[a.GetOwner()]
		if o == nil || !o.unsure {
			t.Errorf("AUDIT: etcd has %v for %s, which no answer gave it", a.GetAddresses(), a.GetOwner())
			continue
		}
		addr, err := netip.ParseAddr(a.GetAddresses()[0])
		if err != nil {
			t.Fatal(err)
		}
		l.holder[addr] = o
		o.addr, o.name, o.unsure = addr, a.GetName(), false
	}
	t.Logf("audit: %d allocations stored, %d owners told they hold one", len(all), len(byOwner))
}

// replicaProc is one ipamd the test kills and starts again on the same
// gRPC address.
type replicaProc struct {
	bin  string
	args []string
	addr string // gRPC address, fixed at the first start

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	tail   []string // the current process's last log lines
}

// start starts ipamd and waits (up to a minute) until it logs that it
// serves.
func (r *replicaProc) start() error {
	listen := r.addr
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	cmd := exec.Command(r.bin, append([]string{"--listen", listen, "--ops-listen", "127.0.0.1:0", "--log-level", "info"}, r.args...)...) //nolint:gosec // the ipamd under test
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	ready := make(chan string, 1)
	r.mu.Lock()
	r.cmd, r.exited, r.tail = cmd, exited, nil
	r.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			r.mu.Lock()
			if r.cmd == cmd {
				r.tail = append(r.tail, line)
				if len(r.tail) > 40 {
					r.tail = r.tail[1:]
				}
			}
			r.mu.Unlock()
			var rec struct{ Msg, Listen string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "ipamd serving" {
				select {
				case ready <- rec.Listen:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case addr := <-ready:
		r.addr = addr
		return nil
	case <-exited:
		return fmt.Errorf("ipamd exited before serving:\n%s", r.logTail())
	case <-time.After(time.Minute):
		r.kill()
		return fmt.Errorf("ipamd not serving after a minute:\n%s", r.logTail())
	}
}

// kill SIGKILLs the current process and waits until it is gone.
func (r *replicaProc) kill() {
	r.mu.Lock()
	cmd, exited := r.cmd, r.exited
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

func (r *replicaProc) logTail() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.tail, "\n")
}
