package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/access"
	"github.com/beaconlb/beacon/services/ipam/internal/allocator"
	"github.com/beaconlb/beacon/services/ipam/internal/announce"
	"github.com/beaconlb/beacon/services/ipam/internal/index"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/subscription"
)

// Writer is what the handlers need to change state.
type Writer interface {
	ConfigWriter
	Allocate(ctx context.Context, req *ipam.Allocation, meta allocator.Meta) (allocator.Result, error)
	Release(ctx context.Context, tenant, id string, etagRev int64, hold *time.Duration, meta allocator.Meta) (allocator.Result, error)
	Renew(ctx context.Context, tenant, id string, etagRev int64, ttl time.Duration, meta allocator.Meta) (allocator.Result, error)
	Update(ctx context.Context, tenant, id string, etagRev int64, change func(*ipam.Allocation), meta allocator.Meta) (allocator.Result, error)
	CreatePool(ctx context.Context, p *ipam.Pool, validateOnly bool, meta allocator.Meta) (allocator.PoolResult, error)
	GetPool(ctx context.Context, name string) (allocator.PoolResult, error)
	UpdatePool(ctx context.Context, next *ipam.Pool, etagRev int64, validateOnly bool, meta allocator.Meta) (allocator.PoolResult, error)
	DeletePool(ctx context.Context, name string, etagRev int64, force bool, meta allocator.Meta) (allocator.PoolResult, error)
	CreateGroup(ctx context.Context, g *ipam.GlobalGroup, meta allocator.Meta) (allocator.GroupResult, error)
	Group(ctx context.Context, key string) (index.GroupState, error)
	UpdateGroup(ctx context.Context, key string, etagRev int64, next func(*ipam.GlobalGroup), meta allocator.Meta) (allocator.GroupResult, error)
	DeleteGroup(ctx context.Context, key string, etagRev int64, meta allocator.Meta) error
}

// Reader is what the handlers need to read stored state.
type Reader interface {
	Get(ctx context.Context, r ipam.Ref) (ipam.Event, error)
	List(ctx context.Context, kind ipam.Kind, idPrefix, startAfter string, limit int, rev int64) (ipam.Page, error)
	WatchKind(ctx context.Context, kind ipam.Kind, idPrefix string, after int64, fn func(events []ipam.Event, rev int64)) error
}

// Usage reports pool usage from the replica's index.
type Usage interface {
	Usage(name string) []index.Usage
	Used(tenant string) uint64
	Held(tenant string) uint64
	Group(key string) (index.GroupState, bool)
}

// Creations lists the audit records live allocations keep (see
// ipam.Allocation.Created): the first limit after startAfter, in ID order,
// and whether there are more.
type Creations interface {
	CreationRecords(ctx context.Context, idPrefix, startAfter string, limit int) ([]*ipam.AuditRecord, bool, error)
}

// Lister lists allocations from the replica's index: CaughtUp returns once
// the index has seen every change etcd had committed when it was called
// (see allocator.Allocator.CaughtUp), Readable fails if the index left out
// an allocation of the tenant it could not decode, Allocations reads a page.
type Lister interface {
	CaughtUp(ctx context.Context) error
	Readable(tenant string) error
	Allocations(q index.AllocationQuery) index.AllocationPage
}

// Leases hands announcer sessions the replica's lease, which their
// nodes' registrations are tied to (subscription.ReplicaLease).
type Leases = subscription.Leases

// Deps are what the server's handlers use.
type Deps struct {
	Writer Writer
	Reader Reader
	Usage  Usage
	// Creations completes the audit log (nil: the log is all in etcd).
	Creations Creations
	// Lister serves ListAllocations (the holds excepted, read from etcd).
	Lister Lister
	// ListRound and ListScanMax bound what a page of ListAllocations
	// examines: per round under the index's lock, and in all (defaults
	// 10,000 and 100,000; see listRound).
	ListRound, ListScanMax int
	// Hub and Leases serve announcers; Announced reports what they announce.
	Hub       *announce.Hub
	Leases    Leases
	Announced *announce.State
	// Heartbeat is how often announcers must send heartbeats (default
	// 200ms); three missed end the session.
	Heartbeat time.Duration
}

// Server implements the IPAM's gRPC services.
type Server struct {
	w         Writer
	r         Reader
	usage     Usage
	creations Creations
	lister    Lister
	listRound int
	listMax   int
	hub       *announce.Hub
	leases    Leases
	announced *announce.State
	heartbeat time.Duration
	logger    *slog.Logger

	pages    pager
	stopping chan struct{} // closed by StopStreams
	stopOnce sync.Once
	// encoding bounds the announcer snapshots encoded at once (see
	// announcerStream.SendUpdate).
	encoding chan struct{}
}

// New returns a Server.
func New(d Deps, logger *slog.Logger) *Server {
	if d.Heartbeat <= 0 {
		d.Heartbeat = 200 * time.Millisecond
	}
	if d.ListRound <= 0 {
		d.ListRound = listRound
	}
	if d.ListScanMax <= 0 {
		d.ListScanMax = listScanMax
	}
	return &Server{w: d.Writer, r: d.Reader, usage: d.Usage, creations: d.Creations, lister: d.Lister, listRound: d.ListRound, listMax: d.ListScanMax, hub: d.Hub, leases: d.Leases, announced: d.Announced, heartbeat: d.Heartbeat, logger: logger, stopping: make(chan struct{}),
		encoding: make(chan struct{}, max(runtime.GOMAXPROCS(0), 1))}
}

// errStopping ends the long-lived streams of a replica that is stopping.
var errStopping = status.Error(codes.Unavailable, "this IPAM replica is stopping: reconnect")

// SetPageKey sets the key that authenticates page tokens; every replica
// must have the same (the replica keeps it in etcd). Call it before
// serving.
func (s *Server) SetPageKey(key []byte) { s.pages.key = key }

// StopStreams ends every long-lived stream (announcer sessions, allocation
// watches) with UNAVAILABLE, so that a graceful stop of the gRPC server
// does not wait for them until its deadline. Announcer sessions ended this
// way leave their nodes' registrations to expire with the replica's
// lease (after subscription.LeaseTTL) instead of deleting them: an
// announcer that reconnects first, to another replica or to this one
// restarted, keeps its registration and its addresses, so a planned
// restart moves nothing. Call it when the server starts stopping.
func (s *Server) StopStreams() { s.stopOnce.Do(func() { close(s.stopping) }) }

// Register registers every service of the server on g.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	ipamv1.RegisterPoolServiceServer(g, &poolService{s: s})
	ipamv1.RegisterAllocationServiceServer(g, &allocationService{s: s})
	ipamv1.RegisterAuditServiceServer(g, &auditService{s: s})
	ipamv1.RegisterAnnouncementServiceServer(g, newAnnouncementService(s))
	ipamv1.RegisterAnnouncerServiceServer(g, &announcerService{s: s})
	ipamv1.RegisterTenantServiceServer(g, &tenantService{s: s})
	ipamv1.RegisterTokenServiceServer(g, &tokenService{s: s})
	ipamv1.RegisterGlobalGroupServiceServer(g, &groupService{s: s})
}

// meta returns the audit and idempotency metadata of a request.
func meta(ctx context.Context, method, requestID string, req proto.Message) allocator.Meta {
	m := allocator.Meta{Actor: access.Actor(ctx), RequestID: requestID, Method: method}
	if requestID != "" {
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(req) // request_id included: same ID, same bytes
		sum := sha256.Sum256(b)
		m.Fingerprint = hex.EncodeToString(sum[:])
	}
	return m
}
