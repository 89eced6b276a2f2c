package robustness

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// brokenAllocator is an allocator with the classic bug: it finds a free
// address under its lock, lets go of the lock, and takes the address
// without looking again, so two owners can get one address.
type brokenAllocator struct {
	ipamv1.UnimplementedAllocationServiceServer
	pools []Pool
	mu    sync.Mutex
	owner map[string][]string // owner -> addresses
}

func (b *brokenAllocator) inUse() map[string]bool {
	used := map[string]bool{}
	for _, as := range b.owner {
		for _, a := range as {
			used[a] = true
		}
	}
	return used
}

func (b *brokenAllocator) Allocate(ctx context.Context, req *ipamv1.AllocateRequest) (*ipamv1.AllocateResponse, error) {
	name := req.GetAllocation().GetOwner()
	b.mu.Lock()
	if got, ok := b.owner[name]; ok {
		b.mu.Unlock()
		return &ipamv1.AllocateResponse{Allocation: &ipamv1.Allocation{Name: allocationName(name), Addresses: got}}, nil
	}
	var pool *Pool
	for i := range b.pools {
		if "pools/"+b.pools[i].Name == req.GetAllocation().GetRequestedPool() {
			pool = &b.pools[i]
		}
	}
	used := b.inUse()
	var picks []string
	fams := [][]netip.Addr{pool.V4}
	if len(req.GetAllocation().GetIpFamilies()) == 2 {
		fams = append(fams, pool.V6)
	}
	for _, fam := range fams {
		for _, a := range fam {
			if len(req.GetAllocation().GetRequestedAddresses()) > 0 && !slices.Contains(req.GetAllocation().GetRequestedAddresses(), a.String()) {
				continue
			}
			if !used[a.String()] {
				picks = append(picks, a.String())
				break
			}
		}
	}
	b.mu.Unlock()
	if len(picks) < len(fams) {
		return nil, status.Error(codes.ResourceExhausted, "exhausted")
	}
	time.Sleep(time.Millisecond) // the window the bug lives in
	b.mu.Lock()
	b.owner[name] = picks
	b.mu.Unlock()
	return &ipamv1.AllocateResponse{Allocation: &ipamv1.Allocation{Name: allocationName(name), Addresses: picks}, Created: true}, nil
}

func (b *brokenAllocator) Release(ctx context.Context, req *ipamv1.ReleaseRequest) (*ipamv1.ReleaseResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	got, ok := b.owner[req.GetOwner()]
	if !ok {
		return nil, status.Error(codes.NotFound, "not found")
	}
	delete(b.owner, req.GetOwner())
	return &ipamv1.ReleaseResponse{Addresses: got}, nil
}

func (b *brokenAllocator) get(name string) (*ipamv1.Allocation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for owner, got := range b.owner {
		if allocationName(owner) == name {
			return &ipamv1.Allocation{Name: name, Addresses: got}, nil
		}
	}
	return nil, status.Error(codes.NotFound, "not found")
}

func (b *brokenAllocator) GetAllocation(ctx context.Context, req *ipamv1.GetAllocationRequest) (*ipamv1.GetAllocationResponse, error) {
	a, err := b.get(req.GetName())
	return &ipamv1.GetAllocationResponse{Allocation: a}, err
}

func (b *brokenAllocator) RenewAllocation(ctx context.Context, req *ipamv1.RenewAllocationRequest) (*ipamv1.RenewAllocationResponse, error) {
	a, err := b.get(req.GetName())
	return &ipamv1.RenewAllocationResponse{Allocation: a}, err
}

func (b *brokenAllocator) UpdateAllocation(ctx context.Context, req *ipamv1.UpdateAllocationRequest) (*ipamv1.UpdateAllocationResponse, error) {
	a, err := b.get(req.GetAllocation().GetName())
	return &ipamv1.UpdateAllocationResponse{Allocation: a}, err
}

// The checker catches an allocator that hands one address to two owners:
// the same clients and checker as the real runs, against brokenAllocator
// over real gRPC.
func TestCheckerCatchesBrokenAllocator(t *testing.T) {
	pools := Workload()
	for i := range pools {
		for j := range pools[i].Owners {
			// The broken allocator knows neither TTLs nor holds.
			pools[i].Owners[j].TTL, pools[i].Owners[j].Hold = 0, 0
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	ipamv1.RegisterAllocationServiceServer(srv, &brokenAllocator{pools: pools, owner: map[string][]string{}})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	cfg := Config{Seed: 1, Duration: 2 * time.Second, Clients: 16, Dir: t.TempDir(), Logf: t.Logf, NoRequestIDs: true}
	rec := &Recorder{}
	if err := Load(context.Background(), cfg, pools, []grpc.ClientConnInterface{conn}, rec, nil); err != nil {
		t.Fatal(err)
	}
	rep := &Report{}
	checkWith(cfg, pools, rec, rep)
	t.Logf("%d operations, checked in %v", rep.Ops, rep.CheckTime)
	i := slices.IndexFunc(rep.Violations, func(v string) bool { return strings.Contains(v, "not linearizable") })
	if i < 0 {
		t.Fatalf("the broken allocator passed the check: %v", rep.Violations)
	}
	t.Logf("caught:\n%s", rep.Violations[i])
}
