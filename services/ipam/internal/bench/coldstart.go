package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/beaconlb/beacon/pkg/loopback"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/store"
)

// UnitMiB is the unit of the resident-memory figures.
const UnitMiB = "MiB"

// ColdStartConfig configures ColdStart.
type ColdStartConfig struct {
	// IPAMD is the ipamd binary.
	IPAMD string
	// Allocations is how many allocations are stored before the measured
	// starts (default 100,000).
	Allocations int
	// Trials is how many starts are measured at each size (default 5);
	// the median is reported.
	Trials int
	// Concurrency is the number of concurrent Allocate calls that fill the
	// store (default 64).
	Concurrency int
	// Log receives progress (default io.Discard).
	Log io.Writer
}

// coldPool is the pool the cold-start allocations come from: IPv6
// documentation space, written to etcd only, never sent traffic.
const (
	coldPool   = "cold"
	coldRange  = "2001:db8:c01d::/64"
	coldTenant = "cold"
)

// ColdStart measures how long a replica (the real ipamd, against an etcd
// embedded in this process, as replicas share an etcd cluster) takes from
// its start to its first answered Allocate, and its resident memory then:
// first with the store holding only the pool (the reference), then with
// Allocations allocations stored. It also times a raw range read of every
// key in etcd (the floor any replica's load stands on).
//
//	BENCH cold_start_empty_ms, cold_start_100k_ms    exec → first Allocate answered (median of Trials)
//	BENCH replica_rss_empty_mib, replica_rss_100k_mib VmRSS of ipamd right after that answer
//	BENCH etcd_range_100k_ms                          one range read of every key in etcd, before each start
//	BENCH cold_start_100k_range_ratio                 median of each start's time over the range read before it
func ColdStart(ctx context.Context, cfg ColdStartConfig) (figs []Figure, err error) {
	if cfg.Allocations <= 0 {
		cfg.Allocations = 100_000
	}
	if cfg.Trials <= 0 {
		cfg.Trials = 5
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	size := sizeName(cfg.Allocations)
	dir, err := os.MkdirTemp("", "ipam-bench-cold-")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	etcdLog := slog.New(slog.NewTextHandler(cfg.Log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	emb, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: dir, ClientURL: "http://127.0.0.1:0", Logger: etcdLog})
	if err != nil {
		return nil, err
	}
	defer emb.Close()
	endpoint := strings.Join(emb.Endpoints(), ",")
	fmt.Fprintf(cfg.Log, "== cold start: ipamd %s against etcd at %s (in this process, fsync on)\n", cfg.IPAMD, endpoint)

	// measure starts ipamd Trials times; before each start, reference (if
	// set) takes its turn, so that both see the same machine.
	type result struct {
		took, ref []time.Duration
		rss       []float64
		ratios    []float64
	}
	measure := func(label string, reference func() (time.Duration, error)) (res result, err error) {
		for i := range cfg.Trials {
			if reference != nil {
				r, err := reference()
				if err != nil {
					return res, err
				}
				res.ref = append(res.ref, r)
			}
			d, mib, err := coldStartOnce(ctx, cfg.IPAMD, endpoint, fmt.Sprintf("%s-%d", label, i))
			if err != nil {
				return res, fmt.Errorf("cold start (%s): %w", label, err)
			}
			fmt.Fprintf(cfg.Log, "cold start %s #%d: first Allocate answered %v after exec, VmRSS %.1f MiB\n", label, i+1, d.Round(time.Millisecond), mib)
			res.took, res.rss = append(res.took, d), append(res.rss, mib)
			if reference != nil {
				res.ratios = append(res.ratios, float64(d)/float64(res.ref[i]))
			}
		}
		return res, nil
	}

	// The pool, then the reference starts on a store that holds only it.
	p, err := startIPAMD(cfg.IPAMD, endpoint)
	if err != nil {
		return nil, err
	}
	if _, err := ipamv1.NewPoolServiceClient(p.conn).CreatePool(ctx, &ipamv1.CreatePoolRequest{
		PoolId: coldPool, Pool: &ipamv1.Pool{Description: "ipam-bench cold start", Ranges: []string{coldRange}},
	}); err != nil {
		return nil, errors.Join(fmt.Errorf("create pool: %w", err), p.stop())
	}
	if err := p.stop(); err != nil {
		return nil, err
	}
	empty, err := measure("empty", nil)
	if err != nil {
		return nil, err
	}

	// Fill through the API, as callers would.
	if p, err = startIPAMD(cfg.IPAMD, endpoint); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := fill(ctx, ipamv1.NewAllocationServiceClient(p.conn), cfg.Allocations, cfg.Concurrency); err != nil {
		return nil, errors.Join(err, p.stop())
	}
	fill := time.Since(t0)
	fmt.Fprintf(cfg.Log, "filled %d allocations in %v (%.0f/s, %d callers)\n", cfg.Allocations, fill.Round(time.Millisecond), float64(cfg.Allocations)/fill.Seconds(), cfg.Concurrency)
	if err := p.stop(); err != nil {
		return nil, err
	}

	// The raw reference, taking turns with the starts: one range read of
	// every key in etcd, the least any replica's load must do.
	client, err := store.Dial(ctx, store.DialConfig{Endpoints: emb.Endpoints()})
	if err != nil {
		return nil, err
	}
	defer func() { _ = client.Close() }()
	rangeRead := func() (time.Duration, error) {
		t0 := time.Now()
		resp, err := client.Etcd().Get(ctx, "\x00", clientv3.WithFromKey())
		if err != nil {
			return 0, fmt.Errorf("range read: %w", err)
		}
		took := time.Since(t0)
		var n int
		for _, kv := range resp.Kvs {
			n += len(kv.Key) + len(kv.Value)
		}
		fmt.Fprintf(cfg.Log, "raw range read: %d keys, %.1f MiB, in %v\n", len(resp.Kvs), float64(n)/(1<<20), took.Round(time.Millisecond))
		return took, nil
	}
	full, err := measure(size, rangeRead)
	if err != nil {
		return nil, err
	}
	return []Figure{
		{"cold_start_empty_ms", millis(median(empty.took)), UnitMillis},
		{"cold_start_" + size + "_ms", millis(median(full.took)), UnitMillis},
		{"etcd_range_" + size + "_ms", millis(median(full.ref)), UnitMillis},
		{"cold_start_" + size + "_range_ratio", medianFloat(full.ratios), UnitRatio},
		{"replica_rss_empty_mib", medianFloat(empty.rss), UnitMiB},
		{"replica_rss_" + size + "_mib", medianFloat(full.rss), UnitMiB},
	}, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianFloat(fs []float64) float64 {
	s := slices.Clone(fs)
	slices.Sort(s)
	return s[len(s)/2]
}

// sizeName names a number of allocations in figure names: 100000 → "100k".
func sizeName(n int) string {
	if n%1000 == 0 {
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// coldStartOnce starts ipamd on a port picked beforehand, calls Allocate
// (waiting for the server to be ready) from right before the exec, and
// returns the time to the answer and ipamd's VmRSS then.
func coldStartOnce(ctx context.Context, bin, endpoint, owner string) (time.Duration, float64, error) {
	r, err := coldStartMeasured(ctx, bin, endpoint, owner)
	return r.Took, r.RSSMiB, err
}

// ColdStartResult is one cold start's measurements.
type ColdStartResult struct {
	// Took is the time from the exec to the first answered Allocate.
	Took time.Duration
	// RSSMiB is ipamd's VmRSS then; CPU the CPU time (user and system) it
	// had used by then, which the machine's load moves far less than Took.
	RSSMiB float64
	CPU    time.Duration
	// PeakMiB is ipamd's VmHWM then: the most it was resident while
	// loading, what a container's memory limit must hold.
	PeakMiB float64
}

func coldStartMeasured(ctx context.Context, bin, endpoint, owner string) (ColdStartResult, error) {
	ports, err := loopback.FreePorts(2)
	if err != nil {
		return ColdStartResult{}, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.2, MaxDelay: 20 * time.Millisecond}, MinConnectTimeout: time.Second}))
	if err != nil {
		return ColdStartResult{}, err
	}
	defer func() { _ = conn.Close() }()
	conn.Connect()
	t0 := time.Now()
	p, err := execIPAMD(bin, addr, fmt.Sprintf("127.0.0.1:%d", ports[1]), endpoint)
	if err != nil {
		return ColdStartResult{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	go func() { // an ipamd that exits (its port taken meanwhile) answers nothing: stop waiting
		select {
		case <-p.exited:
			cancel()
		case <-cctx.Done():
		}
	}()
	_, err = ipamv1.NewAllocationServiceClient(conn).Allocate(cctx, &ipamv1.AllocateRequest{
		Parent:     "tenants/" + coldTenant,
		Allocation: &ipamv1.Allocation{Owner: "cold/first-" + owner, RequestedPool: "pools/" + coldPool},
	}, grpc.WaitForReady(true))
	took := time.Since(t0)
	if err != nil {
		return ColdStartResult{}, errors.Join(fmt.Errorf("first allocate: %w\n%s", err, p.logs()), p.stop())
	}
	rss, rerr := vmStatus(p.cmd.Process.Pid, "VmRSS")
	peak, perr := vmStatus(p.cmd.Process.Pid, "VmHWM")
	cpu, cerr := cpuTime(p.cmd.Process.Pid)
	return ColdStartResult{Took: took, RSSMiB: rss, CPU: cpu, PeakMiB: peak}, errors.Join(rerr, perr, cerr, p.stop())
}

// cpuTime reads a process's CPU time (user and system) from /proc.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command (which may hold spaces, in parentheses):
	// state is field 3, utime 14 and stime 15, in clock ticks (100 a
	// second on Linux).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no command in /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc stat: %w", err)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// vmRSS reads a process's resident memory (VmRSS) from /proc, in MiB.
func vmRSS(pid int) (float64, error) { return vmStatus(pid, "VmRSS") }

// vmStatus reads a memory figure of a process (VmRSS, VmHWM) from
// /proc/PID/status, in MiB.
func vmStatus(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", field, v, err)
			}
			return float64(kb) / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc status", field)
}

// fill makes n allocations of fresh owners with c concurrent callers.
func fill(ctx context.Context, allocs ipamv1.AllocationServiceClient, n, c int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, c)
	for w := range c {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				cctx, cancel := context.WithTimeout(ctx, opTimeout)
				_, err := allocs.Allocate(cctx, &ipamv1.AllocateRequest{
					Parent:     "tenants/" + coldTenant,
					Allocation: &ipamv1.Allocation{Owner: fmt.Sprintf("cold/o-%d", i), RequestedPool: "pools/" + coldPool},
				})
				cancel()
				if err != nil {
					errs[w] = fmt.Errorf("fill, allocation %d: %w", i, err)
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ipamdProc is an ipamd child process.
type ipamdProc struct {
	cmd    *exec.Cmd
	conn   *grpc.ClientConn
	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
}

// execIPAMD starts ipamd against endpoint, listening on addr.
func execIPAMD(bin, addr, ops, endpoint string) (*ipamdProc, error) {
	cmd := exec.Command(bin, "--listen", addr, "--ops-listen", ops, "--etcd-endpoints", endpoint, "--log-level", "warn") //nolint:gosec // the ipamd under measurement
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start ipamd: %w", err)
	}
	p := &ipamdProc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			if p.out.Len() < 1<<20 {
				p.out.WriteString(sc.Text() + "\n")
			}
			p.mu.Unlock()
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// startIPAMD starts ipamd and connects to it (calls wait until it
// serves).
func startIPAMD(bin, endpoint string) (*ipamdProc, error) {
	ports, err := loopback.FreePorts(2)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	p, err := execIPAMD(bin, addr, fmt.Sprintf("127.0.0.1:%d", ports[1]), endpoint)
	if err != nil {
		return nil, err
	}
	p.conn, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
	if err != nil {
		return nil, errors.Join(err, p.stop())
	}
	return p, nil
}

func (p *ipamdProc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// stop closes the connection startIPAMD made, if any, and ends ipamd with
// SIGTERM (SIGKILL after 30 s).
func (p *ipamdProc) stop() error {
	if p.conn != nil {
		_ = p.conn.Close()
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return errors.New("ipamd did not stop within 30 s of SIGTERM; killed")
	}
	if st := p.cmd.ProcessState; st != nil && !st.Success() {
		return fmt.Errorf("ipamd exited %v:\n%s", st, p.logs())
	}
	return nil
}

// ColdStartOnce starts the ipamd binary bin against the etcd at endpoint
// and measures the time from its exec to its first answered Allocate (of a
// fresh owner in the pool ColdStart uses, which must exist), its VmRSS and
// its CPU time then. The ipamd is stopped before it returns.
func ColdStartOnce(ctx context.Context, bin, endpoint, owner string) (ColdStartResult, error) {
	return coldStartMeasured(ctx, bin, endpoint, owner)
}

// ColdPool, ColdRange and ColdTenant are the pool (and its range) and the
// tenant of ColdStartOnce's Allocate.
const (
	ColdPool   = coldPool
	ColdRange  = coldRange
	ColdTenant = coldTenant
)

// IPAMD is an ipamd child process started by StartIPAMD.
type IPAMD struct{ p *ipamdProc }

// StartIPAMD starts the ipamd binary bin against the etcd at endpoint; calls
// on Conn wait until it serves.
func StartIPAMD(bin, endpoint string) (*IPAMD, error) {
	p, err := startIPAMD(bin, endpoint)
	if err != nil {
		return nil, err
	}
	return &IPAMD{p}, nil
}

// Conn is a connection to the ipamd (calls wait for it to serve).
func (d *IPAMD) Conn() *grpc.ClientConn { return d.p.conn }

// RSS returns the ipamd's VmRSS in MiB.
func (d *IPAMD) RSS() (float64, error) { return vmRSS(d.p.cmd.Process.Pid) }

// CPU returns the CPU time (user and system) the ipamd has used.
func (d *IPAMD) CPU() (time.Duration, error) { return cpuTime(d.p.cmd.Process.Pid) }

// Exited is closed when the ipamd has exited.
func (d *IPAMD) Exited() <-chan struct{} { return d.p.exited }

// Stop ends the ipamd (SIGTERM, SIGKILL after 30 s).
func (d *IPAMD) Stop() error { return d.p.stop() }
