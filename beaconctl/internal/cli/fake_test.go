package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// fakeIPAM is a small in-memory implementation of the services, just
// enough for the commands' tests. It records every request with its
// metadata.
type fakeIPAM struct {
	ipamv1.UnimplementedPoolServiceServer
	ipamv1.UnimplementedAllocationServiceServer
	ipamv1.UnimplementedAuditServiceServer
	ipamv1.UnimplementedAnnouncementServiceServer
	ipamv1.UnimplementedAnnouncerServiceServer
	ipamv1.UnimplementedTenantServiceServer
	ipamv1.UnimplementedTokenServiceServer

	mu       sync.Mutex
	requests []proto.Message
	metadata []metadata.MD
	pools    map[string]*ipamv1.Pool
	allocs   map[string]*ipamv1.Allocation
	audit    []*ipamv1.AuditRecord
	// configs are the announcement resources by name.
	configs map[string]proto.Message
	// announcers are the announcers by name.
	announcers map[string]*ipamv1.Announcer
	// tenants and tokens are the tenants and tokens by name.
	tenants map[string]*ipamv1.Tenant
	tokens  map[string]*ipamv1.Token
	// pageSize is the page size when a request asks for none.
	pageSize int
	// err, if set, fails every call.
	err error
	// block makes unary calls wait until they are cancelled.
	block bool
	// watchSend, if set, is sent by WatchAllocations after the snapshot
	// (which it sends unless resuming).
	watchSend *ipamv1.WatchAllocationsResponse
	// watchThen, if set, ends WatchAllocations after that; by default it
	// waits for the client to go away.
	watchThen func(ctx context.Context) error
}

func newFake() *fakeIPAM {
	return &fakeIPAM{
		pools:      map[string]*ipamv1.Pool{},
		allocs:     map[string]*ipamv1.Allocation{},
		configs:    map[string]proto.Message{},
		announcers: map[string]*ipamv1.Announcer{},
		tenants:    map[string]*ipamv1.Tenant{},
		tokens:     map[string]*ipamv1.Token{},
		pageSize:   100,
	}
}

// start serves f on a loopback port until the test ends and returns its
// address.
func (f *fakeIPAM) start(t *testing.T, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts,
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			f.record(ctx, req.(proto.Message))
			if err := f.failure(ctx); err != nil {
				return nil, err
			}
			return handler(ctx, req)
		}),
	)
	s := grpc.NewServer(opts...)
	ipamv1.RegisterPoolServiceServer(s, f)
	ipamv1.RegisterAllocationServiceServer(s, f)
	ipamv1.RegisterAuditServiceServer(s, f)
	ipamv1.RegisterAnnouncementServiceServer(s, f)
	ipamv1.RegisterAnnouncerServiceServer(s, f)
	ipamv1.RegisterTenantServiceServer(s, f)
	ipamv1.RegisterTokenServiceServer(s, f)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

func (f *fakeIPAM) record(ctx context.Context, req proto.Message) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, proto.Clone(req))
	f.metadata = append(f.metadata, md)
}

func (f *fakeIPAM) failure(ctx context.Context) error {
	f.mu.Lock()
	err, block := f.err, f.block
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	return err
}

// recorded returns the requests received so far.
func (f *fakeIPAM) recorded() []proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

func (f *fakeIPAM) recordedMetadata() []metadata.MD {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.metadata)
}

// page returns items[token:token+size] and the next token.
func page[M any](items []M, token string, size, def int) ([]M, string, error) {
	start := 0
	if token != "" {
		n, err := strconv.Atoi(token)
		if err != nil || n < 0 || n > len(items) {
			return nil, "", status.Errorf(codes.InvalidArgument, "bad page token %q", token)
		}
		start = n
	}
	if size <= 0 {
		size = def
	}
	end := min(start+size, len(items))
	next := ""
	if end < len(items) {
		next = strconv.Itoa(end)
	}
	return items[start:end], next, nil
}

func (f *fakeIPAM) CreatePool(_ context.Context, req *ipamv1.CreatePoolRequest) (*ipamv1.CreatePoolResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := "pools/" + req.GetPoolId()
	if _, ok := f.pools[name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "pool %s already exists", name)
	}
	p := proto.Clone(req.GetPool()).(*ipamv1.Pool)
	p.Name, p.Etag = name, "e1"
	if !req.GetValidateOnly() {
		f.pools[name] = p
	}
	return &ipamv1.CreatePoolResponse{Pool: p}, nil
}

func (f *fakeIPAM) GetPool(_ context.Context, req *ipamv1.GetPoolRequest) (*ipamv1.GetPoolResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pools[req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pool %s not found", req.GetName())
	}
	return &ipamv1.GetPoolResponse{Pool: p}, nil
}

func (f *fakeIPAM) ListPools(_ context.Context, req *ipamv1.ListPoolsRequest) (*ipamv1.ListPoolsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []*ipamv1.Pool
	for _, name := range slices.Sorted(maps.Keys(f.pools)) {
		all = append(all, f.pools[name])
	}
	pools, next, err := page(all, req.GetPageToken(), int(req.GetPageSize()), f.pageSize)
	if err != nil {
		return nil, err
	}
	return &ipamv1.ListPoolsResponse{Pools: pools, NextPageToken: next}, nil
}

func (f *fakeIPAM) UpdatePool(_ context.Context, req *ipamv1.UpdatePoolRequest) (*ipamv1.UpdatePoolResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := req.GetPool()
	cur, ok := f.pools[in.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pool %s not found", in.GetName())
	}
	if in.GetEtag() != "" && in.GetEtag() != cur.GetEtag() {
		return nil, status.Errorf(codes.Aborted, "pool %s changed: etag %s, not %s", in.GetName(), cur.GetEtag(), in.GetEtag())
	}
	p := proto.Clone(cur).(*ipamv1.Pool)
	for _, path := range req.GetUpdateMask().GetPaths() {
		switch path {
		case "description":
			p.Description = in.GetDescription()
		case "ranges":
			p.Ranges = in.GetRanges()
		case "exclusions":
			p.Exclusions = in.GetExclusions()
		case "auto_assign":
			p.AutoAssign = in.AutoAssign
		case "avoid_buggy_ips":
			p.AvoidBuggyIps = in.GetAvoidBuggyIps()
		case "tenants":
			p.Tenants = in.GetTenants()
		case "labels":
			p.Labels = in.GetLabels()
		default:
			return nil, status.Errorf(codes.InvalidArgument, "unknown update_mask path %q", path)
		}
	}
	p.Etag = cur.GetEtag() + "+"
	f.pools[p.Name] = p
	return &ipamv1.UpdatePoolResponse{Pool: p}, nil
}

func (f *fakeIPAM) DeletePool(_ context.Context, req *ipamv1.DeletePoolRequest) (*ipamv1.DeletePoolResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.pools[req.GetName()]; !ok {
		return nil, status.Errorf(codes.NotFound, "pool %s not found", req.GetName())
	}
	released := 0
	for name, a := range f.allocs {
		if a.GetPool() == req.GetName() {
			if !req.GetForce() {
				return nil, status.Errorf(codes.FailedPrecondition, "pool %s holds allocations", req.GetName())
			}
			delete(f.allocs, name)
			released++
		}
	}
	delete(f.pools, req.GetName())
	return &ipamv1.DeletePoolResponse{ReleasedAllocations: int32(released)}, nil
}

// fakeAllocationName derives an allocation's name as Allocation.name
// documents, independently of the code under test.
func fakeAllocationName(parent, owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return parent + "/allocations/a" + hex.EncodeToString(sum[:10])
}

func (f *fakeIPAM) Allocate(_ context.Context, req *ipamv1.AllocateRequest) (*ipamv1.AllocateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := fakeAllocationName(req.GetParent(), req.GetAllocation().GetOwner())
	if a, ok := f.allocs[name]; ok {
		return &ipamv1.AllocateResponse{Allocation: a}, nil
	}
	a := proto.Clone(req.GetAllocation()).(*ipamv1.Allocation)
	a.Name = name
	a.Pool = a.GetRequestedPool()
	if a.Pool == "" {
		a.Pool = "pools/web"
	}
	a.Addresses = a.GetRequestedAddresses()
	if len(a.Addresses) == 0 {
		a.Addresses = []string{fmt.Sprintf("192.0.2.%d", len(f.allocs)+1)}
	}
	a.Etag = "e1"
	f.allocs[name] = a
	return &ipamv1.AllocateResponse{Allocation: a, Created: true}, nil
}

func (f *fakeIPAM) Release(_ context.Context, req *ipamv1.ReleaseRequest) (*ipamv1.ReleaseResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := req.GetName()
	if name == "" {
		name = fakeAllocationName(req.GetParent(), req.GetOwner())
	}
	a, ok := f.allocs[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "allocation %s not found", name)
	}
	delete(f.allocs, name)
	resp := &ipamv1.ReleaseResponse{Addresses: a.GetAddresses()}
	if h := req.GetHold(); h != nil && h.AsDuration() > 0 {
		resp.HoldExpireTime = timestamppb.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	}
	return resp, nil
}

func (f *fakeIPAM) GetAllocation(_ context.Context, req *ipamv1.GetAllocationRequest) (*ipamv1.GetAllocationResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.allocs[req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "allocation %s not found", req.GetName())
	}
	return &ipamv1.GetAllocationResponse{Allocation: a}, nil
}

func (f *fakeIPAM) sortedAllocs(parent string) []*ipamv1.Allocation {
	var out []*ipamv1.Allocation
	for _, name := range slices.Sorted(maps.Keys(f.allocs)) {
		if parent == "tenants/-" || strings.HasPrefix(name, parent+"/") {
			out = append(out, f.allocs[name])
		}
	}
	return out
}

func (f *fakeIPAM) ListAllocations(_ context.Context, req *ipamv1.ListAllocationsRequest) (*ipamv1.ListAllocationsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	allocs, next, err := page(f.sortedAllocs(req.GetParent()), req.GetPageToken(), int(req.GetPageSize()), f.pageSize)
	if err != nil {
		return nil, err
	}
	return &ipamv1.ListAllocationsResponse{Allocations: allocs, NextPageToken: next}, nil
}

func (f *fakeIPAM) RenewAllocation(_ context.Context, req *ipamv1.RenewAllocationRequest) (*ipamv1.RenewAllocationResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.allocs[req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "allocation %s not found", req.GetName())
	}
	a = proto.Clone(a).(*ipamv1.Allocation)
	a.ExpireTime = timestamppb.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	f.allocs[a.Name] = a
	return &ipamv1.RenewAllocationResponse{Allocation: a}, nil
}

func (f *fakeIPAM) WatchAllocations(req *ipamv1.WatchAllocationsRequest, stream grpc.ServerStreamingServer[ipamv1.WatchAllocationsResponse]) error {
	ctx := stream.Context()
	f.record(ctx, req)
	if err := f.failure(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	var snapshot *ipamv1.WatchAllocationsResponse
	if req.GetResumeToken() == "" {
		snapshot = &ipamv1.WatchAllocationsResponse{ResumeToken: "r1", SnapshotComplete: true}
		for _, a := range f.sortedAllocs(req.GetParent()) {
			snapshot.Events = append(snapshot.Events, &ipamv1.AllocationEvent{Type: ipamv1.AllocationEvent_TYPE_EXISTING, Allocation: a})
		}
	}
	send, then := f.watchSend, f.watchThen
	f.mu.Unlock()
	for _, resp := range []*ipamv1.WatchAllocationsResponse{snapshot, send} {
		if resp == nil {
			continue
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
	if then != nil {
		return then(ctx)
	}
	<-ctx.Done()
	return status.FromContextError(ctx.Err()).Err()
}

func (f *fakeIPAM) ListAuditRecords(_ context.Context, req *ipamv1.ListAuditRecordsRequest) (*ipamv1.ListAuditRecordsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var recs []*ipamv1.AuditRecord
	for _, r := range f.audit {
		if req.GetParent() == "tenants/-" || strings.HasPrefix(r.GetName(), req.GetParent()+"/") {
			recs = append(recs, r)
		}
	}
	recs, next, err := page(recs, req.GetPageToken(), int(req.GetPageSize()), f.pageSize)
	if err != nil {
		return nil, err
	}
	return &ipamv1.ListAuditRecordsResponse{AuditRecords: recs, NextPageToken: next}, nil
}

// syncBuffer is a bytes.Buffer safe for a command writing while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// result is what one run of beaconctl did.
type result struct {
	stdout, stderr string
	err            error
}

// run runs beaconctl with args and the environment env (nil: empty).
func run(ctx context.Context, env map[string]string, args ...string) result {
	return runStdin(ctx, env, nil, args...)
}

// runStdin runs beaconctl with args, the environment env (nil: empty) and
// standard input stdin (nil: none).
func runStdin(ctx context.Context, env map[string]string, stdin io.Reader, args ...string) result {
	var stdout, stderr syncBuffer
	cmd := NewRootCommand(Env{
		Stdin:  stdin,
		Stdout: &stdout,
		Stderr: &stderr,
		Getenv: func(k string) string { return env[k] },
	})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// runAt runs beaconctl against the plaintext server at addr.
func runAt(t *testing.T, addr string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return run(ctx, nil, append([]string{"--plaintext", "--server", addr}, args...)...)
}
