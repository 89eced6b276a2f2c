package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/beaconlb/beacon/pkg/ipamtest"
	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// The commands' tests run against real IPAM replicas (pkg/ipamtest): each
// test that changes state starts its own, and what it needs (pools,
// allocations, config, a subscribed announcer) it makes with real calls.
// A recorder between beaconctl and the replica keeps the requests the
// commands send, so that the tests can check them field by field.

func TestMain(m *testing.M) { ipamtest.Main(m) }

// testIPAM is one real replica and an admin connection to it (plaintext:
// every caller is an admin) for making the state a test needs.
type testIPAM struct {
	t    *testing.T
	addr string
	conn *grpc.ClientConn
}

// newIPAM starts a replica of its own for t (release hold 0s).
func newIPAM(t *testing.T) *testIPAM {
	t.Helper()
	r := ipamtest.Start(t, ipamtest.Options{}).Replicas[0]
	return &testIPAM{t: t, addr: r.Addr, conn: r.Conn(t)}
}

// ctx is a context for one setup call.
func (e *testIPAM) ctx() context.Context {
	ctx, cancel := context.WithTimeout(e.t.Context(), 30*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

// pool creates a pool (auto-assign) with ranges.
func (e *testIPAM) pool(id string, ranges ...string) {
	e.t.Helper()
	if _, err := ipamv1.NewPoolServiceClient(e.conn).CreatePool(e.ctx(), &ipamv1.CreatePoolRequest{PoolId: id, Pool: &ipamv1.Pool{Ranges: ranges}}); err != nil {
		e.t.Fatalf("setup: %v", err)
	}
}

// allocate gives owner in tenant an allocation (from pool, if set) and
// returns it.
func (e *testIPAM) allocate(tenant, owner, pool string, mod ...func(*ipamv1.Allocation)) *ipamv1.Allocation {
	e.t.Helper()
	a := &ipamv1.Allocation{Owner: owner}
	if pool != "" {
		a.RequestedPool = "pools/" + pool
	}
	for _, m := range mod {
		m(a)
	}
	resp, err := ipamv1.NewAllocationServiceClient(e.conn).Allocate(e.ctx(), &ipamv1.AllocateRequest{Parent: "tenants/" + tenant, Allocation: a})
	if err != nil {
		e.t.Fatalf("setup: allocate %s: %v", owner, err)
	}
	return resp.GetAllocation()
}

// allocationName derives an allocation's name as Allocation.name
// documents, independently of the code under test.
func allocationName(parent, owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return parent + "/allocations/a" + hex.EncodeToString(sum[:10])
}

// recorder relays every call it gets to a real replica and keeps the
// requests (decoded by their method's input type) and the metadata.
type recorder struct {
	backend  *grpc.ClientConn
	mu       sync.Mutex
	requests []proto.Message
	metadata []metadata.MD
}

// record starts a recorder in front of the replica on a loopback port,
// stopped when the test ends, and returns it and its address. opts are
// its server's options (TLS credentials).
func (e *testIPAM) record(t *testing.T, opts ...grpc.ServerOption) (*recorder, string) {
	t.Helper()
	rec := &recorder{backend: e.conn}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(append(opts, grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(rec.relay))...)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-served
	})
	return rec, lis.Addr().String()
}

// relay forwards one call, of any kind, to the backend.
func (r *recorder) relay(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	in, _ := metadata.FromIncomingContext(ss.Context())
	out := metadata.MD{}
	for k, v := range in {
		if !strings.HasPrefix(k, ":") && !strings.HasPrefix(k, "grpc-") && k != "content-type" && k != "user-agent" {
			out[k] = v
		}
	}
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ss.Context(), out))
	defer cancel()
	cs, err := r.backend.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		return err
	}
	go func() {
		for {
			var b []byte
			if err := ss.RecvMsg(&b); err != nil {
				_ = cs.CloseSend()
				return
			}
			r.keep(method, in, b)
			if err := cs.SendMsg(&b); err != nil {
				return
			}
		}
	}()
	for {
		var b []byte
		err := cs.RecvMsg(&b)
		if md, herr := cs.Header(); herr == nil && len(md) > 0 {
			_ = ss.SetHeader(md)
		}
		if errors.Is(err, io.EOF) {
			ss.SetTrailer(cs.Trailer())
			return nil
		}
		if err != nil {
			ss.SetTrailer(cs.Trailer())
			return err
		}
		if err := ss.SendMsg(&b); err != nil {
			return err
		}
	}
}

// keep decodes and records one request message of method.
func (r *recorder) keep(method string, md metadata.MD, b []byte) {
	m, err := requestOf(method)
	if err == nil {
		err = proto.Unmarshal(b, m)
	}
	if err != nil {
		panic(fmt.Sprintf("recorder: %s: %v", method, err))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, m)
	r.metadata = append(r.metadata, md)
}

// requestOf returns an empty request message of method
// ("/package.Service/Method").
func requestOf(method string) (proto.Message, error) {
	svc, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return nil, fmt.Errorf("method %q", method)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, err
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a service", svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, fmt.Errorf("no method %s", method)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		return nil, err
	}
	return mt.New().Interface(), nil
}

// recorded returns the requests received so far.
func (r *recorder) recorded() []proto.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests)
}

// recordedMetadata returns the metadata of the calls received so far.
func (r *recorder) recordedMetadata() []metadata.MD {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.metadata)
}

// rawCodec passes messages through as bytes: the recorder relays them
// without knowing their types.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("rawCodec: %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(*b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: %T", v)
	}
	*b = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// syncBuffer is a bytes.Buffer safe for a command writing while the test
// reads, that tells waiters of each write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	// changed, if set, is closed at the next write.
	changed chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits up to d until cond holds for what was written, and
// reports whether it did.
func (s *syncBuffer) waitFor(d time.Duration, cond func(string) bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if cond(s.b.String()) {
			s.mu.Unlock()
			return true
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// normalize replaces what a real IPAM answers differently each run:
// timestamps with TIME, and JSON etags and uids with ETAG and UID.
func normalize(s string) string {
	s = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`).ReplaceAllString(s, "TIME")
	s = regexp.MustCompile(`("etag": ?)"(\\.|[^"\\])*"`).ReplaceAllString(s, `$1"ETAG"`)
	return regexp.MustCompile(`("uid": ?)"[0-9a-f]+"`).ReplaceAllString(s, `$1"UID"`)
}

// unpadded joins the fields of each line of a table with one space.
func unpadded(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(strings.Join(strings.Fields(line), " ") + "\n")
	}
	return b.String()
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

// placeholder stands in a case's args and wanted requests for a value
// only the real IPAM knows (an etag it made).
const placeholder = "ETAG"

// fill replaces placeholder with value in args and in every string field
// of want (copies).
func fill(args []string, want []proto.Message, value string) ([]string, []proto.Message) {
	args = slices.Clone(args)
	for i, a := range args {
		if a == placeholder {
			args[i] = value
		}
	}
	out := make([]proto.Message, 0, len(want))
	for _, m := range want {
		m = proto.Clone(m)
		replaceStrings(m.ProtoReflect(), placeholder, value)
		out = append(out, m)
	}
	return args, out
}

func replaceStrings(m protoreflect.Message, from, to string) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Kind() == protoreflect.StringKind && !fd.IsList() && !fd.IsMap() && v.String() == from:
			m.Set(fd, protoreflect.ValueOfString(to))
		case fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap():
			replaceStrings(v.Message(), from, to)
		}
		return true
	})
}

// eventually calls check until it returns nil, every 50ms for up to d,
// and fails the test with its last error if it never does.
func eventually(t *testing.T, d time.Duration, check func() error) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("not within %s: %v", d, err)
		}
	}
}

// announce runs a real announcer session for node of tenant over gRPC, as
// announcerd would: a hello with labels and interfaces, then st as its
// status, then heartbeats until the test ends. It returns once the IPAM
// lists the node live with that status.
func (e *testIPAM) announce(tenant, node string, labels map[string]string, ifs []*ipamv1.NetworkInterface, st *ipamv1.AnnouncerStatus) {
	t := e.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := ipamv1.NewAnnouncerServiceClient(e.conn).Subscribe(ctx)
	if err != nil {
		t.Fatalf("setup: subscribe %s: %v", node, err)
	}
	received := make(chan struct{})
	go func() { // the IPAM's plans are not needed, only read
		defer close(received)
		for {
			if _, err := stream.Recv(); err != nil {
				return
			}
		}
	}()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for seq := uint64(1); ; seq++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if stream.Send(&ipamv1.SubscribeRequest{Body: &ipamv1.SubscribeRequest_Heartbeat{Heartbeat: &ipamv1.Heartbeat{Sequence: seq}}}) != nil {
					return
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-sent
		<-received
	})
	for _, m := range []*ipamv1.SubscribeRequest{
		{Body: &ipamv1.SubscribeRequest_Hello{Hello: &ipamv1.SubscribeHello{Parent: "tenants/" + tenant, Node: node, Labels: labels, Interfaces: ifs}}},
		{Body: &ipamv1.SubscribeRequest_Status{Status: st}},
	} {
		if err := stream.Send(m); err != nil {
			t.Fatalf("announcer %s: %v", node, err)
		}
	}
	name := "tenants/" + tenant + "/announcers/" + node
	eventually(t, 30*time.Second, func() error {
		resp, err := ipamv1.NewAnnouncerServiceClient(e.conn).GetAnnouncer(e.ctx(), &ipamv1.GetAnnouncerRequest{Name: name})
		switch {
		case err != nil:
			return err
		case !resp.GetAnnouncer().GetLive():
			return fmt.Errorf("%s not live", name)
		case len(resp.GetAnnouncer().GetStatus().GetAnnounced()) != len(st.GetAnnounced()):
			return fmt.Errorf("%s: status %v, want %v", name, resp.GetAnnouncer().GetStatus(), st)
		}
		return nil
	})
}

// named is a resource with a name and an etag.
type named interface {
	GetName() string
	GetEtag() string
}

// resetConfig deletes every announcement config resource of tenant.
func (e *testIPAM) resetConfig(tenant string) {
	t := e.t
	t.Helper()
	c := ipamv1.NewAnnouncementServiceClient(e.conn)
	parent := "tenants/" + tenant
	del := func(items []named, err error, deleteOne func(name string) error) {
		t.Helper()
		if err != nil {
			t.Fatalf("reset %s: %v", parent, err)
		}
		for _, it := range items {
			if err := deleteOne(it.GetName()); err != nil {
				t.Fatalf("reset %s: delete %s: %v", parent, it.GetName(), err)
			}
		}
	}
	ctx := e.ctx()
	l2, err := c.ListL2Advertisements(ctx, &ipamv1.ListL2AdvertisementsRequest{Parent: parent})
	del(asNamed(l2.GetL2Advertisements()), err, func(n string) error {
		_, err := c.DeleteL2Advertisement(ctx, &ipamv1.DeleteL2AdvertisementRequest{Name: n})
		return err
	})
	bgp, err := c.ListBGPAdvertisements(ctx, &ipamv1.ListBGPAdvertisementsRequest{Parent: parent})
	del(asNamed(bgp.GetBgpAdvertisements()), err, func(n string) error {
		_, err := c.DeleteBGPAdvertisement(ctx, &ipamv1.DeleteBGPAdvertisementRequest{Name: n})
		return err
	})
	peers, err := c.ListBGPPeers(ctx, &ipamv1.ListBGPPeersRequest{Parent: parent})
	del(asNamed(peers.GetBgpPeers()), err, func(n string) error {
		_, err := c.DeleteBGPPeer(ctx, &ipamv1.DeleteBGPPeerRequest{Name: n})
		return err
	})
	bfd, err := c.ListBFDProfiles(ctx, &ipamv1.ListBFDProfilesRequest{Parent: parent})
	del(asNamed(bfd.GetBfdProfiles()), err, func(n string) error {
		_, err := c.DeleteBFDProfile(ctx, &ipamv1.DeleteBFDProfileRequest{Name: n})
		return err
	})
	comms, err := c.ListCommunities(ctx, &ipamv1.ListCommunitiesRequest{Parent: parent})
	del(asNamed(comms.GetCommunities()), err, func(n string) error {
		_, err := c.DeleteCommunity(ctx, &ipamv1.DeleteCommunityRequest{Name: n})
		return err
	})
	nodes, err := c.ListNodes(ctx, &ipamv1.ListNodesRequest{Parent: parent})
	del(asNamed(nodes.GetNodes()), err, func(n string) error {
		_, err := c.DeleteNode(ctx, &ipamv1.DeleteNodeRequest{Name: n})
		return err
	})
}

func asNamed[M named](ms []M) []named {
	out := make([]named, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

// configEtag returns the etag of the announcement config resource (or
// allocation) name.
func (e *testIPAM) configEtag(name string) string {
	t := e.t
	t.Helper()
	c := ipamv1.NewAnnouncementServiceClient(e.conn)
	ctx := e.ctx()
	var m named
	var err error
	switch {
	case strings.Contains(name, "/l2Advertisements/"):
		var r *ipamv1.GetL2AdvertisementResponse
		r, err = c.GetL2Advertisement(ctx, &ipamv1.GetL2AdvertisementRequest{Name: name})
		m = r.GetL2Advertisement()
	case strings.Contains(name, "/bgpAdvertisements/"):
		var r *ipamv1.GetBGPAdvertisementResponse
		r, err = c.GetBGPAdvertisement(ctx, &ipamv1.GetBGPAdvertisementRequest{Name: name})
		m = r.GetBgpAdvertisement()
	case strings.Contains(name, "/bgpPeers/"):
		var r *ipamv1.GetBGPPeerResponse
		r, err = c.GetBGPPeer(ctx, &ipamv1.GetBGPPeerRequest{Name: name})
		m = r.GetBgpPeer()
	case strings.Contains(name, "/bfdProfiles/"):
		var r *ipamv1.GetBFDProfileResponse
		r, err = c.GetBFDProfile(ctx, &ipamv1.GetBFDProfileRequest{Name: name})
		m = r.GetBfdProfile()
	case strings.Contains(name, "/communities/"):
		var r *ipamv1.GetCommunityResponse
		r, err = c.GetCommunity(ctx, &ipamv1.GetCommunityRequest{Name: name})
		m = r.GetCommunity()
	case strings.Contains(name, "/allocations/"):
		var r *ipamv1.GetAllocationResponse
		r, err = ipamv1.NewAllocationServiceClient(e.conn).GetAllocation(ctx, &ipamv1.GetAllocationRequest{Name: name})
		m = r.GetAllocation()
	case strings.Contains(name, "/nodes/"):
		var r *ipamv1.GetNodeResponse
		r, err = c.GetNode(ctx, &ipamv1.GetNodeRequest{Name: name})
		m = r.GetNode()
	default:
		t.Fatalf("configEtag: %s is no announcement config", name)
	}
	if err != nil {
		t.Fatalf("configEtag %s: %v", name, err)
	}
	return m.GetEtag()
}
