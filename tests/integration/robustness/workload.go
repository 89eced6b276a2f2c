package robustness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// Parent is the tenant the workload allocates in.
const Parent = "tenants/default"

// GhostWindow bounds how long after its call an operation whose outcome is
// unknown may still take effect: the client's deadline, the replica's etcd
// time-out, a cut's length and TCP's retransmissions, with room to spare.
const GhostWindow = 10 * time.Second

// callTimeout is each call's deadline.
const callTimeout = 3 * time.Second

func addrs(prefix string, from, n int) []netip.Addr {
	var out []netip.Addr
	a := netip.MustParseAddr(prefix)
	for range from {
		a = a.Next()
	}
	for range n {
		out = append(out, a)
		a = a.Next()
	}
	return out
}

// Workload returns the pools the clients use: small, so that they fill up
// and owners contend for addresses.
func Workload() []Pool {
	ttl := 10 * time.Second
	hold := 3 * time.Second
	plain := Pool{Name: "r-plain", V4: addrs("198.51.100.0", 0, 8)}
	for i := range 6 {
		plain.Owners = append(plain.Owners, Owner{Name: fmt.Sprintf("plain/o%d", i), Hold: hold})
	}
	plain.Owners = append(plain.Owners,
		Owner{Name: "plain/ttl0", TTL: ttl},
		Owner{Name: "plain/ttl1", TTL: ttl, Hold: hold},
		Owner{Name: "plain/want7a", Requested: addrs("198.51.100.7", 0, 1), Hold: hold},
		Owner{Name: "plain/want7b", Requested: addrs("198.51.100.7", 0, 1)},
	)
	shared := Pool{Name: "r-shared", V4: addrs("198.51.100.16", 0, 4)}
	for i := range 4 {
		shared.Owners = append(shared.Owners, Owner{Name: fmt.Sprintf("shared/k1-%d", i), Key: "k1", Ports: []int32{int32(1000 + i)}})
	}
	shared.Owners = append(shared.Owners,
		Owner{Name: "shared/k1-clash", Key: "k1", Ports: []int32{1000}},
		Owner{Name: "shared/k2-0", Key: "k2", Ports: []int32{80}},
		Owner{Name: "shared/k2-1", Key: "k2", Ports: []int32{443}},
		Owner{Name: "shared/alone", TTL: ttl},
	)
	dual := Pool{Name: "r-dual", V4: addrs("203.0.113.0", 0, 4), V6: addrs("2001:db8:ff::", 0, 4)}
	for i := range 4 {
		dual.Owners = append(dual.Owners, Owner{Name: fmt.Sprintf("dual/o%d", i), Dual: true, Hold: hold})
	}
	dual.Owners = append(dual.Owners,
		Owner{Name: "dual/ttl", Dual: true, TTL: ttl},
		Owner{Name: "dual/want3", Dual: true, Requested: []netip.Addr{netip.MustParseAddr("203.0.113.3"), netip.MustParseAddr("2001:db8:ff::3")}, Hold: hold},
	)
	return []Pool{plain, shared, dual}
}

// CreatePools creates the workload's pools.
func CreatePools(ctx context.Context, conn grpc.ClientConnInterface, pools []Pool) error {
	pc := ipamv1.NewPoolServiceClient(conn)
	for _, p := range pools {
		var ranges []string
		for _, fam := range [][]netip.Addr{p.V4, p.V6} {
			if len(fam) > 0 {
				ranges = append(ranges, fam[0].String()+"-"+fam[len(fam)-1].String())
			}
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := pc.CreatePool(cctx, &ipamv1.CreatePoolRequest{PoolId: p.Name, Pool: &ipamv1.Pool{Ranges: ranges}})
		cancel()
		if err != nil {
			return fmt.Errorf("create pool %s: %w", p.Name, err)
		}
	}
	return nil
}

// Recorder collects the history.
type Recorder struct {
	mu  sync.Mutex
	ops []porcupine.Operation
	// Replays counts requests re-sent with an old request_id; Mismatches
	// describes each that got another answer than the first.
	Replays    int
	Mismatches []string
	// Unknown counts operations whose outcome stayed unknown; Dropped
	// those that never reached a replica.
	Unknown, Dropped int
	// BadRequests are requests the IPAM found malformed (a workload bug).
	BadRequests []string
}

func (r *Recorder) add(client int, in Input, out Output, call, ret int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if out.Outcome == Unknown {
		r.Unknown++
	}
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
}

// Operations returns the history so far.
func (r *Recorder) Operations() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]porcupine.Operation(nil), r.ops...)
}

// Client runs one client of the workload.
type Client struct {
	ID    int
	Pools []Pool
	Conns []grpc.ClientConnInterface // one per replica
	Rec   *Recorder
	Rand  *rand.Rand
	// NoRequestIDs turns request_ids off (for allocators without them).
	NoRequestIDs bool

	seq  int
	done []replayable // answered requests with a request_id
}

type replayable struct {
	in  Input
	req proto.Message
	out Output
}

// Run issues operations until ctx is done.
func (c *Client) Run(ctx context.Context) {
	for ctx.Err() == nil {
		c.Step(ctx)
	}
}

// Step issues one random operation and records it.
func (c *Client) Step(ctx context.Context) {
	r := c.Rand
	pi := r.IntN(len(c.Pools))
	p := &c.Pools[pi]
	oi := r.IntN(len(p.Owners))
	o := &p.Owners[oi]
	in := Input{Pool: pi, Owner: oi}
	x := r.Float64()
	switch {
	case x < 0.40:
		in.Kind = OpAllocate
	case x < 0.65:
		in.Kind = OpRelease
		if o.Hold > 0 && r.IntN(2) == 0 {
			in.Hold = o.Hold
		}
	case x < 0.75 && o.TTL > 0:
		in.Kind = OpRenew
	case x < 0.85:
		in.Kind = OpUpdate
	case x < 0.95 || len(c.done) == 0:
		in.Kind = OpGet
	default:
		c.replay(ctx)
		return
	}
	// Most writes carry a request_id; one in five does not (none of the
	// dual-stack pool's, whose unknown outcomes would each open 16 ways
	// the allocation may have gone, too many for the checker to follow).
	if (in.Kind == OpAllocate || in.Kind == OpRelease || in.Kind == OpUpdate) && !c.NoRequestIDs && (len(p.V6) > 0 || r.Float64() < 0.8) {
		c.seq++
		in.RequestID = fmt.Sprintf("c%d-%d-%d", c.ID, c.seq, r.Uint32())
	}
	c.Do(ctx, in)
}

// Do runs one operation: with a request_id, retried until it has a
// definite answer; without, once.
func (c *Client) Do(ctx context.Context, in Input) Output {
	req := c.request(in)
	call := time.Now().UnixNano()
	// A client that drops its connection between send and answer: a
	// deadline too short for the answer, then the retry.
	first := callTimeout
	if in.RequestID != "" && c.Rand.IntN(10) == 0 {
		first = time.Duration(1+c.Rand.IntN(20)) * time.Millisecond
	}
	out, sent := c.attempt(ctx, in, req, first)
	if in.RequestID == "" || !sent || out.Outcome != Unknown {
		return c.record(in, req, out, sent, call, time.Now().UnixNano())
	}
	// Retry until an answer is definite. A success is (the first one is
	// recorded under the id); a refusal is not while an earlier attempt
	// may still commit: then wait until none can, and ask again.
	lastUnknown := call
	deadline := time.Now().Add(time.Minute)
	for {
		time.Sleep(time.Duration(20+c.Rand.IntN(200)) * time.Millisecond)
		at := time.Now().UnixNano()
		out, _ = c.attempt(context.WithoutCancel(ctx), in, req, callTimeout)
		switch {
		case out.Outcome == Unknown && time.Now().Before(deadline):
			lastUnknown = at
			continue
		case out.Outcome == Refused && time.Now().Before(time.Unix(0, lastUnknown).Add(GhostWindow)):
			sleep(context.WithoutCancel(ctx), time.Until(time.Unix(0, lastUnknown).Add(GhostWindow)))
			continue
		case out.Outcome == Refused:
			// Nothing committed, and nothing can any more: no effect.
			return out
		}
		return c.record(in, req, out, true, call, time.Now().UnixNano())
	}
}

// record adds an answered (or unanswered) operation to the history.
func (c *Client) record(in Input, req proto.Message, out Output, sent bool, call, ret int64) Output {
	if strings.HasPrefix(out.Code, badRequest) {
		c.Rec.mu.Lock()
		c.Rec.BadRequests = append(c.Rec.BadRequests, fmt.Sprintf("%s %s: %s", in.Kind, c.Pools[in.Pool].Owners[in.Owner].Name, out.Code))
		c.Rec.mu.Unlock()
		return out
	}
	if !sent {
		c.Rec.mu.Lock()
		c.Rec.Dropped++
		c.Rec.mu.Unlock()
		return out
	}
	if out.Outcome == Unknown {
		if in.Kind != OpAllocate && in.Kind != OpRelease {
			// Reads, updates of labels and renewals change nothing the
			// model checks (a renewal only delays an end the model never
			// forces): one of unknown outcome says nothing.
			c.Rec.mu.Lock()
			c.Rec.Unknown++
			c.Rec.mu.Unlock()
			return out
		}
		ret = call + int64(GhostWindow)
	}
	in.CallWall, in.ReturnWall = call, ret
	c.Rec.add(c.ID, in, out, call, ret)
	if in.RequestID != "" && out.Outcome == OK {
		c.done = append(c.done, replayable{in: in, req: req, out: out})
		if len(c.done) > 64 {
			c.done = c.done[1:]
		}
	}
	return out
}

// replay re-sends an answered request with its request_id, to a random
// replica: it must get the first answer, whatever happened since.
func (c *Client) replay(ctx context.Context) {
	rp := c.done[c.Rand.IntN(len(c.done))]
	out, sent := c.attempt(ctx, rp.in, rp.req, callTimeout)
	if !sent || out.Outcome == Unknown {
		return
	}
	c.Rec.mu.Lock()
	defer c.Rec.mu.Unlock()
	c.Rec.Replays++
	if !sameAnswer(out, rp.out) {
		c.Rec.Mismatches = append(c.Rec.Mismatches, fmt.Sprintf("%s %s: first answer %+v, retry got %+v",
			rp.in.Kind, rp.in.RequestID, rp.out, out))
	}
}

func sameAnswer(a, b Output) bool {
	if a.Outcome != b.Outcome || a.Code != b.Code || a.Created != b.Created || a.Expire != b.Expire || len(a.Addrs) != len(b.Addrs) {
		return false
	}
	for i := range a.Addrs {
		if a.Addrs[i] != b.Addrs[i] {
			return false
		}
	}
	return true
}

func (c *Client) request(in Input) proto.Message {
	p := &c.Pools[in.Pool]
	o := &p.Owners[in.Owner]
	name := allocationName(o.Name)
	switch in.Kind {
	case OpAllocate:
		a := &ipamv1.Allocation{Owner: o.Name, RequestedPool: "pools/" + p.Name, SharingKey: o.Key}
		for _, port := range o.Ports {
			a.Ports = append(a.Ports, &ipamv1.Port{Port: port, Protocol: ipamv1.Protocol_PROTOCOL_TCP})
		}
		if o.Dual {
			a.IpFamilyPolicy = ipamv1.IPFamilyPolicy_IP_FAMILY_POLICY_REQUIRE_DUAL_STACK
			a.IpFamilies = []ipamv1.IPFamily{ipamv1.IPFamily_IP_FAMILY_IPV4, ipamv1.IPFamily_IP_FAMILY_IPV6}
		}
		for _, r := range o.Requested {
			a.RequestedAddresses = append(a.RequestedAddresses, r.String())
		}
		if o.TTL > 0 {
			a.Ttl = durationpb.New(o.TTL)
		}
		return &ipamv1.AllocateRequest{Parent: Parent, Allocation: a, RequestId: in.RequestID}
	case OpRelease:
		return &ipamv1.ReleaseRequest{Parent: Parent, Owner: o.Name, Hold: durationpb.New(in.Hold), RequestId: in.RequestID}
	case OpRenew:
		return &ipamv1.RenewAllocationRequest{Name: name}
	case OpUpdate:
		return &ipamv1.UpdateAllocationRequest{
			Allocation: &ipamv1.Allocation{Name: name, OwnerLabels: map[string]string{"seq": fmt.Sprint(c.Rand.IntN(1000))}},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"owner_labels"}},
			RequestId:  in.RequestID,
		}
	default:
		return &ipamv1.GetAllocationRequest{Name: name}
	}
}

// attempt sends req once to a random replica; sent is false when it
// certainly never reached one.
func (c *Client) attempt(ctx context.Context, in Input, req proto.Message, timeout time.Duration) (Output, bool) {
	conn := c.Conns[c.Rand.IntN(len(c.Conns))]
	ac := ipamv1.NewAllocationServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		a   *ipamv1.Allocation
		err error
		out Output
	)
	switch r := req.(type) {
	case *ipamv1.AllocateRequest:
		var resp *ipamv1.AllocateResponse
		resp, err = ac.Allocate(ctx, r)
		a, out.Created = resp.GetAllocation(), resp.GetCreated()
	case *ipamv1.ReleaseRequest:
		var resp *ipamv1.ReleaseResponse
		resp, err = ac.Release(ctx, r)
		if err == nil {
			out.Addrs = parseAddrs(resp.GetAddresses())
			if resp.GetHoldExpireTime() != nil {
				out.Expire = resp.GetHoldExpireTime().AsTime().UnixNano()
			}
		}
	case *ipamv1.RenewAllocationRequest:
		var resp *ipamv1.RenewAllocationResponse
		resp, err = ac.RenewAllocation(ctx, r)
		a = resp.GetAllocation()
	case *ipamv1.UpdateAllocationRequest:
		var resp *ipamv1.UpdateAllocationResponse
		resp, err = ac.UpdateAllocation(ctx, r)
		a = resp.GetAllocation()
	case *ipamv1.GetAllocationRequest:
		var resp *ipamv1.GetAllocationResponse
		resp, err = ac.GetAllocation(ctx, r)
		a = resp.GetAllocation()
	}
	if err != nil {
		return classify(err)
	}
	out.Outcome = OK
	if a != nil {
		out.Addrs = parseAddrs(a.GetAddresses())
		if a.GetExpireTime() != nil {
			out.Expire = a.GetExpireTime().AsTime().UnixNano()
		}
	}
	return out, true
}

// classify turns an error into an outcome: a refusal the IPAM made, or an
// unknown outcome; sent is false for a call that never left the client.
func classify(err error) (Output, bool) {
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.NotFound, codes.FailedPrecondition, codes.ResourceExhausted, codes.Aborted:
		reason := ""
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				reason = info.GetReason()
			}
		}
		if reason == "" && st.Code() == codes.NotFound {
			reason = CodeNotFound
		}
		return Output{Outcome: Refused, Code: reason}, true
	case codes.InvalidArgument:
		return Output{Outcome: Refused, Code: badRequest + st.Message()}, true
	case codes.Unavailable:
		if strings.Contains(st.Message(), "Error while dialing") || strings.Contains(st.Message(), "connection refused") {
			return Output{Outcome: Unknown}, false
		}
	}
	return Output{Outcome: Unknown, Code: st.Code().String() + ": " + st.Message()}, true
}

func parseAddrs(ss []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		a, err := netip.ParseAddr(s)
		if err != nil {
			a = netip.IPv6Unspecified() // never in a pool: the model refuses it
		}
		out = append(out, a)
	}
	return out
}

// badRequest starts the code of a request the IPAM found malformed: a
// fault of the workload, not of the allocator; it is reported apart.
const badRequest = "BAD_REQUEST: "

// allocationName is the resource name of an owner's allocation: "a" and the
// first 20 hex digits of the SHA-256 of the owner.
func allocationName(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return Parent + "/allocations/a" + hex.EncodeToString(sum[:])[:20]
}
