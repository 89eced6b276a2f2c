// Package lb holds the steps that keep one owner's IPAM allocation equal to
// what its Service asks for: allocate, re-allocate when the request changed
// in a way the held addresses cannot satisfy, update the owner metadata and
// traffic fields, release. It talks to the IPAM's AllocationService and knows
// nothing of Kubernetes.
//
// Only internal/kube and cmd/k8s-adapter import this package.
package lb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
)

// IPAM reasons (google.rpc.ErrorInfo) the adapter acts on.
const (
	ReasonOwnerHoldsOther = "OWNER_HOLDS_OTHER_ALLOCATION"
	ReasonNotFound        = "NOT_FOUND"
)

// Client performs allocation steps for one tenant. It is safe for concurrent
// use.
type Client struct {
	alloc  ipamv1.AllocationServiceClient
	parent string
	hold   *durationpb.Duration
}

// Options tune a Client.
type Options struct {
	// Hold is how long a released Service's addresses stay reserved for it
	// (so that a Service deleted and created again gets them back). Nil: the
	// IPAM's default.
	Hold *time.Duration
}

// New returns a Client for tenant ("c1", not "tenants/c1").
func New(alloc ipamv1.AllocationServiceClient, tenant string, o Options) *Client {
	c := &Client{alloc: alloc, parent: "tenants/" + tenant}
	if o.Hold != nil {
		c.hold = durationpb.New(*o.Hold)
	}
	return c
}

// Result says what Ensure did.
type Result struct {
	// Allocation is the owner's allocation now; nil if it has none.
	Allocation *ipamv1.Allocation
	// Created is set when the owner had no allocation before.
	Created bool
	// Replaced holds the addresses given up because the request changed in
	// a way they could not satisfy (another address, pool, family or
	// sharing key). Set even when the new allocation then failed.
	Replaced []string
	// Updated names the fields changed on an existing allocation.
	Updated []string
	// Adopted is set when Adopt allocated the addresses it was given.
	Adopted bool
	// NotAdopted is the IPAM's refusal of the addresses Adopt was given
	// (another owner holds them, they are in no pool, or no pool the owner
	// may draw from); the allocation then is Ensure's.
	NotAdopted *Error
}

// Ensure makes the owner's allocation match want: it allocates, and if the
// owner holds an allocation that does not satisfy want, releases it at once
// and allocates again; then it updates owner_labels, namespace_labels,
// ports, traffic_policy and endpoint_nodes where they differ.
func (c *Client) Ensure(ctx context.Context, want *ipamv1.Allocation) (Result, error) {
	var res Result
	resp, err := c.alloc.Allocate(ctx, &ipamv1.AllocateRequest{Parent: c.parent, Allocation: want})
	if err == nil && !resp.GetCreated() && resp.GetAllocation().GetSharingKey() != want.GetSharingKey() {
		// Held under another sharing key: the IPAM would keep it, MetalLB
		// re-allocates.
		err = &Error{Code: codes.FailedPrecondition, Reason: ReasonOwnerHoldsOther, Message: "held under another sharing key"}
	}
	if ReasonOf(err) == ReasonOwnerHoldsOther {
		addrs, rerr := c.release(ctx, want.GetOwner(), durationpb.New(0))
		if rerr != nil {
			return res, fmt.Errorf("release to re-allocate: %w", rerr)
		}
		res.Replaced = addrs
		resp, err = c.alloc.Allocate(ctx, &ipamv1.AllocateRequest{Parent: c.parent, Allocation: want})
	}
	if err != nil {
		return res, wrap("allocate", err)
	}
	res.Allocation, res.Created = resp.GetAllocation(), resp.GetCreated()
	mask := diff(res.Allocation, want)
	if len(mask) == 0 {
		return res, nil
	}
	upd := &ipamv1.Allocation{
		Name: res.Allocation.GetName(), OwnerLabels: want.GetOwnerLabels(), NamespaceLabels: want.GetNamespaceLabels(),
		Ports: want.GetPorts(), TrafficPolicy: want.GetTrafficPolicy(), EndpointNodes: want.GetEndpointNodes(),
		GlobalRole: want.GetGlobalRole(),
	}
	uresp, err := c.alloc.UpdateAllocation(ctx, &ipamv1.UpdateAllocationRequest{Allocation: upd, UpdateMask: &fieldmaskpb.FieldMask{Paths: mask}})
	if err != nil {
		return res, wrap("update allocation", err)
	}
	res.Allocation, res.Updated = uresp.GetAllocation(), mask
	return res, nil
}

// Adopt is Ensure for an owner that asks for no particular address but is
// known to use addrs (a Service whose status shows them: written by MetalLB
// before a migration, or by the adapter before the owner's allocation was
// lost). It first asks for exactly addrs; if the IPAM allocates them, or
// the owner already holds them, they are kept. If the owner holds other
// addresses, those win (the IPAM's record is the truth for an owner it
// knows). If the IPAM refuses addrs for a reason that another try would not
// change (in use, in no pool, not allowed), Ensure allocates as usual and
// Result.NotAdopted says why addrs were not kept. A retryable failure is
// returned as it is: a passing fault must not move an address.
func (c *Client) Adopt(ctx context.Context, want *ipamv1.Allocation, addrs []string) (Result, error) {
	try := proto.CloneOf(want)
	try.RequestedAddresses = slices.Clone(addrs)
	resp, err := c.alloc.Allocate(ctx, &ipamv1.AllocateRequest{Parent: c.parent, Allocation: try})
	if err == nil {
		// Allocated or already held; Ensure updates what differs (and
		// re-allocates if it was held under another sharing key).
		res, err := c.Ensure(ctx, want)
		res.Adopted = resp.GetCreated() && len(res.Replaced) == 0
		return res, err
	}
	werr := wrap("allocate the status addresses", err)
	var e *Error
	if !errors.As(werr, &e) || e.Retryable() {
		return Result{}, werr
	}
	res, err := c.Ensure(ctx, want)
	if e.Reason != ReasonOwnerHoldsOther {
		res.NotAdopted = e
	}
	return res, err
}

// Released is what a release gave back.
type Released struct {
	// Addresses released; nil if the owner held none.
	Addresses []string
	// HoldEnds is when the hold keeping them for the owner ends; zero if
	// they are free now.
	HoldEnds time.Time
}

// Release frees the owner's allocation, keeping it for the owner for hold
// (nil: the Client's configured hold, else the IPAM's default; 0: free at
// once). An owner with no allocation gives nothing and no error.
func (c *Client) Release(ctx context.Context, owner string, hold *time.Duration) (Released, error) {
	h := c.hold
	if hold != nil {
		h = durationpb.New(*hold)
	}
	resp, err := c.alloc.Release(ctx, &ipamv1.ReleaseRequest{Parent: c.parent, Owner: owner, Hold: h})
	if ReasonOf(err) == ReasonNotFound || status.Code(err) == codes.NotFound {
		return Released{}, nil
	}
	if err != nil {
		return Released{}, wrap("release", err)
	}
	r := Released{Addresses: resp.GetAddresses()}
	if t := resp.GetHoldExpireTime(); t != nil {
		r.HoldEnds = t.AsTime()
	}
	return r, nil
}

func (c *Client) release(ctx context.Context, owner string, hold *durationpb.Duration) ([]string, error) {
	resp, err := c.alloc.Release(ctx, &ipamv1.ReleaseRequest{Parent: c.parent, Owner: owner, Hold: hold})
	if ReasonOf(err) == ReasonNotFound || status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("release", err)
	}
	return resp.GetAddresses(), nil
}

// List returns every allocation of the tenant.
func (c *Client) List(ctx context.Context) ([]*ipamv1.Allocation, error) {
	var out []*ipamv1.Allocation
	token := ""
	for {
		resp, err := c.alloc.ListAllocations(ctx, &ipamv1.ListAllocationsRequest{Parent: c.parent, PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, wrap("list allocations", err)
		}
		out = append(out, resp.GetAllocations()...)
		if token = resp.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}

// diff names the updatable fields in which have differs from want.
func diff(have, want *ipamv1.Allocation) []string {
	var mask []string
	if !maps.Equal(have.GetOwnerLabels(), want.GetOwnerLabels()) {
		mask = append(mask, "owner_labels")
	}
	if !maps.Equal(have.GetNamespaceLabels(), want.GetNamespaceLabels()) {
		mask = append(mask, "namespace_labels")
	}
	if !slices.Equal(portKeys(have.GetPorts()), portKeys(want.GetPorts())) {
		mask = append(mask, "ports")
	}
	if norm(have.GetTrafficPolicy()) != norm(want.GetTrafficPolicy()) {
		mask = append(mask, "traffic_policy")
	}
	if !slices.Equal(sorted(have.GetEndpointNodes()), sorted(want.GetEndpointNodes())) {
		mask = append(mask, "endpoint_nodes")
	}
	if want.GetGlobalGroup() != "" && roleOf(have) != roleOf(want) {
		mask = append(mask, "global_role")
	}
	return mask
}

// roleOf is an allocation's global role, unset meaning active.
func roleOf(a *ipamv1.Allocation) ipamv1.GlobalRole {
	if a.GetGlobalRole() == ipamv1.GlobalRole_GLOBAL_ROLE_UNSPECIFIED {
		return ipamv1.GlobalRole_GLOBAL_ROLE_ACTIVE
	}
	return a.GetGlobalRole()
}

func norm(p ipamv1.TrafficPolicy) ipamv1.TrafficPolicy {
	if p == ipamv1.TrafficPolicy_TRAFFIC_POLICY_UNSPECIFIED {
		return ipamv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER
	}
	return p
}

func portKeys(ps []*ipamv1.Port) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		proto := p.GetProtocol()
		if proto == ipamv1.Protocol_PROTOCOL_UNSPECIFIED {
			proto = ipamv1.Protocol_PROTOCOL_TCP
		}
		out = append(out, fmt.Sprintf("%d/%d", p.GetPort(), proto))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// Error is a refusal or failure of the IPAM, with its ErrorInfo reason.
type Error struct {
	Code    codes.Code
	Reason  string // ErrorInfo reason, e.g. POOL_EXHAUSTED; else the code's name
	Message string
	// Metadata is the ErrorInfo's: for an address kept for a released
	// owner, held_for and hold_expire_time.
	Metadata map[string]string
	cause    error
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

// Unwrap returns the gRPC error.
func (e *Error) Unwrap() error { return e.cause }

// Retryable reports whether trying again may succeed without anything
// changing: the IPAM was unreachable or busy.
func (e *Error) Retryable() bool {
	switch e.Code {
	case codes.Unavailable, codes.Aborted, codes.DeadlineExceeded, codes.Internal, codes.Unknown, codes.Canceled:
		return true
	}
	return false
}

// Retryable reports whether err is a failure of the IPAM that another try
// may overcome without anything changing (unreachable, busy), rather than
// a refusal.
func Retryable(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		e = asError(err)
	}
	return e.Retryable()
}

// wrap turns a gRPC error into an *Error, naming the step.
func wrap(step string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return fmt.Errorf("%s: %w", step, err)
	}
	return fmt.Errorf("%s: %w", step, asError(err))
}

// asError turns a gRPC error into an *Error.
func asError(err error) *Error {
	// status.FromError of a wrapped status puts the wrapping text into the
	// message; the status itself is wanted.
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		err = gs.(error)
	}
	st, _ := status.FromError(err)
	e := &Error{Code: st.Code(), Reason: reasonOfStatus(st), Message: st.Message(), cause: err}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			e.Metadata = info.GetMetadata()
		}
	}
	return e
}

// ReasonOf returns the ErrorInfo reason of an IPAM error ("POOL_EXHAUSTED"),
// the gRPC code's name if it has none, or "" for nil.
func ReasonOf(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	st, _ := status.FromError(err)
	return reasonOfStatus(st)
}

func reasonOfStatus(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() != "" {
			return info.GetReason()
		}
	}
	return st.Code().String()
}

// ErrResumeTooOld is returned by Watch when the IPAM can no longer resume
// from the token: the caller must assume it missed changes.
var ErrResumeTooOld = errors.New("watch: resume token too old")

// Change is one allocation change seen by Watch.
type Change struct {
	// Owner is the allocation's owner ("ns/name").
	Owner string
	// Addresses are the allocation's addresses; nil when Deleted.
	Addresses []string
	// Deleted is set when the allocation was released or expired.
	Deleted bool
	// Snapshot is set on the allocations of the snapshot that starts a
	// stream opened without a token.
	Snapshot bool
	// SnapshotDone marks the end of that snapshot (no allocation: Owner is
	// empty); the changes after it are live.
	SnapshotDone bool
}

// Watch follows the tenant's allocations from token ("" for a snapshot
// first) and calls f for each change, in commit order, until the stream
// ends. It returns the token to resume from (updated as the stream goes,
// also when it fails) and why the stream ended: ErrResumeTooOld, the
// context's error, or the IPAM's.
func (c *Client) Watch(ctx context.Context, token string, f func(Change)) (string, error) {
	stream, err := c.alloc.WatchAllocations(ctx, &ipamv1.WatchAllocationsRequest{Parent: c.parent, ResumeToken: token})
	if err != nil {
		return token, wrap("watch allocations", err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			if status.Code(err) == codes.OutOfRange {
				return "", ErrResumeTooOld
			}
			if ctx.Err() != nil {
				return token, ctx.Err()
			}
			return token, wrap("watch allocations", err)
		}
		for _, ev := range resp.GetEvents() {
			a := ev.GetAllocation()
			ch := Change{Owner: a.GetOwner(), Addresses: a.GetAddresses(), Snapshot: ev.GetType() == ipamv1.AllocationEvent_TYPE_EXISTING}
			if ev.GetType() == ipamv1.AllocationEvent_TYPE_DELETED {
				ch.Addresses, ch.Deleted = nil, true
			}
			f(ch)
		}
		if t := resp.GetResumeToken(); t != "" {
			token = t
		}
		if resp.GetSnapshotComplete() {
			f(Change{SnapshotDone: true})
		}
	}
}
