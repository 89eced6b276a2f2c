package store

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Options tunes a Store.
type Options struct {
	// Workers is how many transactions may be in flight at once (default
	// 1). One is pure group commit: everything queued while a transaction
	// is in flight goes into the next one. Against a 3-member etcd cluster
	// that carries 8 concurrent callers at 0.94-0.99 of raw etcd's
	// throughput, against 0.71-0.78 with 2 or 4 in flight (each
	// transaction costs every member a raft round and an fsync); against
	// one embedded member the number makes no measurable difference (see
	// docs/performance.md).
	Workers int
	// MaxOps is the most operations in one transaction (default 128, etcd's
	// default --max-txn-ops).
	MaxOps int
	// MaxBytes is about the most bytes of keys and values one transaction
	// carries (default 1 MiB, under etcd's default --max-request-bytes of
	// 1.5 MiB, with room for framing). A change larger than that alone
	// fails with ipam.ErrTooLarge.
	MaxBytes int
	// RequestTTL is how long request_id records are kept (default 24h).
	RequestTTL time.Duration
	// AuditTTL is how long audit records are kept (default 30 days).
	AuditTTL time.Duration
	// GuardTTL is how long a guard (ipam.Share, ipam.TenantGuard) is kept
	// after its last write, at least (default 10 minutes): far longer than
	// any replica's watch takes to deliver a commit.
	GuardTTL time.Duration
	// CallTimeout bounds each etcd call (default 5s): etcd that does not
	// answer in time is reported unavailable (ipam.ErrUnavailable) at once,
	// instead of holding the caller until its own deadline, and a commit
	// worker never waits on a dead etcd forever. Watches are not bounded.
	CallTimeout time.Duration
	// ElectionTTL is the lease of a replica's key in an election (see
	// Campaign; default 2s, etcd's lease granularity is seconds): how long
	// after a leader stops renewing it another may be elected.
	ElectionTTL time.Duration
}

// Store reads and writes IPAM state in etcd.
type Store struct {
	client *clientv3.Client
	// conn routes transactions (built as protobuf messages, see
	// commitBatch) to etcd's KV service: in process, or the leader's.
	conn   *Client
	logger *slog.Logger
	opts   Options
	queue  chan *pending
	// slots bounds the transactions in flight (Options.Workers); base is
	// Run's context while it runs (see lead).
	slots chan struct{}
	base  atomic.Pointer[context.Context]

	leaseMu sync.Mutex
	leases  map[time.Duration]leaseSlot

	// written holds the values this store committed, by key, until the
	// watch delivers them: the watch then passes them on instead of
	// decoding the bytes it got back (see remember and recall).
	writtenMu sync.Mutex
	written   map[string]writtenValue

	// unreadable holds what the watch skipped (see Unreadable).
	unreadable unreadable
}

// writtenValue is a value committed at a revision.
type writtenValue struct {
	rev   int64
	value any
}

// maxWritten bounds the committed values kept for the watch (when it lags
// or is down, the oldest are not worth keeping: it decodes instead).
const maxWritten = 1 << 16

type leaseSlot struct {
	id      clientv3.LeaseID
	expires time.Time // when to stop attaching new keys to it
}

// New returns a Store over an etcd client. Call Run to start committing.
func New(client *Client, logger *slog.Logger, opts Options) *Store {
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	if opts.MaxOps <= 0 {
		opts.MaxOps = 128
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 1 << 20
	}
	if opts.RequestTTL <= 0 {
		opts.RequestTTL = 24 * time.Hour
	}
	if opts.GuardTTL <= 0 {
		opts.GuardTTL = 10 * time.Minute
	}
	if opts.AuditTTL <= 0 {
		opts.AuditTTL = 30 * 24 * time.Hour
	}
	if opts.ElectionTTL <= 0 {
		opts.ElectionTTL = 2 * time.Second
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 5 * time.Second
	}
	return &Store{
		client:  client.etcd,
		conn:    client,
		logger:  logger,
		opts:    opts,
		queue:   make(chan *pending, 1024),
		slots:   make(chan struct{}, opts.Workers),
		leases:  make(map[time.Duration]leaseSlot),
		written: make(map[string]writtenValue),
	}
}

// remember keeps the state objects items wrote at rev for the watch.
func (s *Store) remember(items []*pending, rev int64) {
	s.writtenMu.Lock()
	defer s.writtenMu.Unlock()
	if len(s.written) > maxWritten {
		clear(s.written)
	}
	for _, p := range items {
		for i, w := range p.change.Puts {
			if w.Ref.Kind != ipam.KindAudit && w.Ref.Kind != ipam.KindRequest {
				s.written[p.puts[i].key] = writtenValue{rev: rev, value: w.Value}
			}
		}
	}
}

// recall returns the value this store committed under k at rev, or nil,
// and forgets what it remembers of k up to rev.
func (s *Store) recall(k string, rev int64) any {
	s.writtenMu.Lock()
	defer s.writtenMu.Unlock()
	w, ok := s.written[k]
	if !ok || w.rev > rev {
		return nil
	}
	delete(s.written, k)
	if w.rev != rev {
		return nil
	}
	return w.value
}

// logSlow logs an etcd call that failed or took longer than slowTxn.
func (s *Store) logSlow(ctx context.Context, what string, start time.Time, err error) {
	if took := time.Since(start); err != nil || took > slowTxn {
		s.logger.WarnContext(ctx, "etcd call failed or slow", "call", what, "took", took, "error", err)
	}
}

// bounded returns ctx bounded by CallTimeout, for one etcd call.
func (s *Store) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.CallTimeout)
}

// Revision returns etcd's current revision (a linearizable read).
func (s *Store) Revision(ctx context.Context) (int64, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	start := time.Now()
	resp, err := s.client.Get(ctx, root+"ready", clientv3.WithCountOnly())
	s.logSlow(ctx, "read revision", start, err)
	if err != nil {
		return 0, fmt.Errorf("store: read revision: %w: %w", ipam.ErrUnavailable, err)
	}
	return resp.Header.Revision, nil
}

// RequestProgress asks etcd to tell the state watch (WatchState) its
// current revision even when nothing it watches changed, so a follower
// knows it is caught up.
func (s *Store) RequestProgress(ctx context.Context) error {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	// The watches run with WithRequireLeader, the state watch on a stream
	// of its own (stateStream): the request must name the same stream.
	if err := s.client.RequestProgress(clientv3.WithRequireLeader(stateStream(ctx))); err != nil {
		return fmt.Errorf("store: request watch progress: %w: %w", ipam.ErrUnavailable, err)
	}
	return nil
}

// Ready reports whether etcd answers a linearizable read.
func (s *Store) Ready(ctx context.Context) error {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	if _, err := s.client.Get(ctx, root+"ready", clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("store: etcd not ready: %w: %w", ipam.ErrUnavailable, err)
	}
	return nil
}

// leaseFor returns a lease for keys that should live about ttl. Keys share
// one lease per ttl for an hour, so they live between ttl and ttl+1h; this
// costs one lease grant an hour, not one per key.
func (s *Store) leaseFor(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, error) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	now := time.Now()
	if slot, ok := s.leases[ttl]; ok && now.Before(slot.expires) {
		return slot.id, nil
	}
	gctx, cancel := s.bounded(ctx)
	defer cancel()
	start := time.Now()
	id, _, err := s.conn.grant(gctx, int64((ttl + time.Hour).Seconds()))
	s.logSlow(ctx, "lease grant", start, err)
	if err != nil {
		return 0, fmt.Errorf("store: grant lease: %w: %w", ipam.ErrUnavailable, err)
	}
	s.leases[ttl] = leaseSlot{id: id, expires: now.Add(time.Hour)}
	return id, nil
}

// Get reads one object; ErrNotFound (ipam) if absent.
func (s *Store) Get(ctx context.Context, r ipam.Ref) (ipam.Event, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	start := time.Now()
	resp, err := s.client.Get(ctx, key(r))
	s.logSlow(ctx, "get", start, err)
	if err != nil {
		return ipam.Event{}, fmt.Errorf("store: get %s: %w: %w", key(r), ipam.ErrUnavailable, err)
	}
	if len(resp.Kvs) == 0 {
		return ipam.Event{Ref: r, Rev: resp.Header.Revision}, ipam.ErrNotFound
	}
	v, err := decode(r.Kind, resp.Kvs[0].Value)
	if err != nil {
		return ipam.Event{}, err
	}
	return ipam.Event{Ref: r, Value: v, Rev: resp.Kvs[0].ModRevision}, nil
}

// List reads up to limit objects of a kind whose ID starts with idPrefix,
// after the ID startAfter, in key order, at revision rev (0: the latest).
func (s *Store) List(ctx context.Context, kind ipam.Kind, idPrefix, startAfter string, limit int, rev int64) (ipam.Page, error) {
	prefix := kindPrefix(kind) + idPrefix
	from := prefix
	if startAfter != "" {
		from = key(ipam.Ref{Kind: kind, ID: startAfter}) + "\x00"
	}
	if kind == ipam.KindAudit && startAfter != "" {
		if id, inclusive := auditResume(startAfter); inclusive {
			// The pack may hold nothing after startAfter: read one key
			// more, so that a page always moves on.
			from = key(ipam.Ref{Kind: kind, ID: id})
			limit++
		}
	}
	if rev == 0 {
		// A scan stopped early never hears etcd's revision: pin it first.
		r, err := s.Revision(ctx)
		if err != nil {
			return ipam.Page{}, err
		}
		rev = r
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	// One key more than the page, to tell whether there are more.
	kvs := make([]*mvccpb.KeyValue, 0, min(limit+1, 1024))
	_, err := s.conn.scan(ctx, from, clientv3.GetPrefixRangeEnd(prefix), rev, limit+1, func(chunk []*mvccpb.KeyValue) error {
		kvs = append(kvs, chunk[:min(len(chunk), limit+1-len(kvs))]...)
		if len(kvs) > limit {
			return errScanDone
		}
		return nil
	})
	if err != nil {
		return ipam.Page{}, fmt.Errorf("store: list %s: %w: %w", prefix, ipam.ErrUnavailable, err)
	}
	page := ipam.Page{Revision: rev, More: len(kvs) > limit}
	kvs = kvs[:min(len(kvs), limit)]
	for _, kv := range kvs {
		ref, ok := parseKey(string(kv.Key))
		if !ok || ref.Kind != kind {
			continue
		}
		if kind == ipam.KindAudit {
			recs, err := unpackAudit(kv.Value)
			if err != nil {
				return ipam.Page{}, err
			}
			for _, r := range recs {
				id := r.Key()
				if startAfter != "" && id <= startAfter {
					continue // the records of a pack already listed
				}
				page.Items = append(page.Items, ipam.Event{Ref: ipam.Ref{Kind: kind, ID: id}, Value: r, Rev: kv.ModRevision})
			}
			continue
		}
		v, err := decode(kind, kv.Value)
		if err != nil {
			return ipam.Page{}, err
		}
		page.Items = append(page.Items, ipam.Event{Ref: ref, Value: v, Rev: kv.ModRevision})
	}
	return page, nil
}

// ClaimsIn reads the claims of addresses in [from, to] at revision rev.
func (s *Store) ClaimsIn(ctx context.Context, from, to ipam.Ref, rev int64) ([]ipam.Event, error) {
	opts := []clientv3.OpOption{clientv3.WithRange(key(to) + "\x00")}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	resp, err := s.client.Get(ctx, key(from), opts...)
	if err != nil {
		return nil, fmt.Errorf("store: read claims: %w: %w", ipam.ErrUnavailable, err)
	}
	out := make([]ipam.Event, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		ref, ok := parseKey(string(kv.Key))
		if !ok {
			continue
		}
		v, err := decode(ipam.KindClaim, kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, ipam.Event{Ref: ref, Value: v, Rev: kv.ModRevision})
	}
	return out, nil
}
