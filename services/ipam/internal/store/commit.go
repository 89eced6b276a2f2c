package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// slowTxn is how long a transaction may take before it is logged.
const slowTxn = 500 * time.Millisecond

// pending is one change waiting to be committed.
type pending struct {
	ctx    context.Context
	change ipam.Change
	// prepared is the change's keys and encoded values, made by the caller
	// (in parallel with other callers) rather than by the committer.
	prepared
	done chan commitResult // buffered, 1
}

// prepared is a change in etcd's terms: its puts (audit records left
// whole, to be packed), deletes and compared keys, in the change's order.
type prepared struct {
	puts     []preparedPut
	deletes  []string
	condKeys []string
	// bytes is about how much the change adds to a transaction's request
	// (an upper bound: see opBytes).
	bytes int
}

// opBytes bounds what protobuf framing adds to a transaction request per
// comparison or operation, over its key and value (tags, lengths, a
// revision or a lease).
const opBytes = 32

// auditBytes bounds the size of an audit record in a pack: its strings,
// escaped at worst, and its addresses.
func auditBytes(r *ipam.AuditRecord) int {
	n := len(r.Tenant) + len(r.ID) + len(r.Actor) + len(r.Allocation) + len(r.Owner) + len(r.Pool) + len(r.RequestID)
	return 256 + 6*n + 48*len(r.Addrs)
}

type preparedPut struct {
	key   string
	value []byte            // nil for an audit record
	audit *ipam.AuditRecord // the record, for an audit put
	// guard is set for a guard (ipam.Share, ipam.TenantGuard): changes of
	// one batch that put the same guard at the same condition are committed
	// together, the guard written once.
	guard bool
}

// prepare encodes a change's writes and computes its keys.
func prepare(ch ipam.Change) (prepared, error) {
	p := prepared{
		puts:     make([]preparedPut, len(ch.Puts)),
		deletes:  make([]string, len(ch.Deletes)),
		condKeys: make([]string, len(ch.Conds)),
	}
	for i, w := range ch.Puts {
		p.puts[i].key = key(w.Ref)
		p.puts[i].guard = w.Ref.Kind == ipam.KindShare || w.Ref.Kind == ipam.KindTenantGuard
		if rec, ok := w.Value.(*ipam.AuditRecord); ok && w.Ref.Kind == ipam.KindAudit && !w.Alone {
			p.puts[i].audit = rec
			p.bytes += opBytes + len(p.puts[i].key) + auditBytes(rec)
			continue
		}
		b, err := encode(w.Ref.Kind, w.Value)
		if err != nil {
			return prepared{}, err
		}
		p.puts[i].value = b
		p.bytes += opBytes + len(p.puts[i].key) + len(b)
	}
	for i, r := range ch.Deletes {
		p.deletes[i] = key(r)
		p.bytes += opBytes + len(p.deletes[i])
	}
	for i, c := range ch.Conds {
		p.condKeys[i] = key(c.Ref)
		p.bytes += opBytes + len(p.condKeys[i])
	}
	for _, rc := range ch.Unchanged {
		from, end := rangeKeys(rc)
		p.bytes += opBytes + len(from) + len(end)
	}
	return p, nil
}

type commitResult struct {
	rev   int64
	fresh []ipam.Event
	err   error
}

// Commit commits a change atomically: all its writes if all its conditions
// hold. Concurrent changes are packed into one etcd transaction (group
// commit), which is what lets the IPAM keep up with etcd under load.
//
// It returns the revision of the commit, or ipam.ErrConflict with the current
// state of every object the change compared, so the caller can plan again
// without another read. Run must be running.
//
// A change bigger than one transaction may carry (Options.MaxOps,
// Options.MaxBytes) fails alone with ipam.ErrTooLarge.
func (s *Store) Commit(ctx context.Context, ch ipam.Change) (int64, []ipam.Event, error) {
	if n := max(len(ch.Conds)+len(ch.Unchanged), len(ch.Puts)+len(ch.Deletes)); n > s.opts.MaxOps {
		return 0, nil, ipam.Refuse(ipam.ErrTooLarge, "the request needs %d storage operations in one transaction, more than the %d allowed", n, s.opts.MaxOps)
	}
	prep, err := prepare(ch)
	if err != nil {
		return 0, nil, err
	}
	if prep.bytes > s.opts.MaxBytes {
		return 0, nil, ipam.Refuse(ipam.ErrTooLarge, "the request writes about %d KiB in one transaction, more than the %d KiB allowed (fewer or smaller labels, endpoint nodes or ranges)", (prep.bytes+1023)>>10, s.opts.MaxBytes>>10)
	}
	p := &pending{ctx: ctx, change: ch, prepared: prep, done: make(chan commitResult, 1)}
	if base := s.base.Load(); base != nil {
		select {
		case s.slots <- struct{}{}:
			// No transaction in flight: commit here, with whatever is
			// queued, under Run's context (not the caller's, which would
			// end the others' commits too).
			s.lead(*base, p)
			<-s.slots
			r := <-p.done
			return r.rev, r.fresh, r.err
		default:
		}
	}
	select {
	case s.queue <- p:
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
	select {
	case r := <-p.done:
		return r.rev, r.fresh, r.err
	case <-ctx.Done():
		// The change may still commit; callers retry idempotently.
		return 0, nil, ctx.Err()
	}
}

// Run commits queued changes until ctx is done.
func (s *Store) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	s.base.Store(&ctx)
	defer s.base.Store(nil)
	g.Go(func() error { s.conn.followLeader(ctx, s.logger, s.opts.CallTimeout); return nil })
	for range s.opts.Workers {
		g.Go(func() error { s.work(ctx); return nil })
	}
	return g.Wait()
}

// batch is a set of changes that fit one transaction: distinct keys written,
// at most MaxOps compares and writes, and at most MaxBytes.
type batch struct {
	items   []*pending
	written map[string]bool
	guards  map[string]int64 // guard key -> the revision its writers compare
	cmps    int
	ops     int
	bytes   int
}

// condRev returns the revision p's change compares key with, or -1.
func (p *pending) condRev(key string) int64 {
	for i, k := range p.condKeys {
		if k == key {
			return p.change.Conds[i].Rev
		}
	}
	return -1
}

func (b *batch) fits(p *pending, maxOps, maxBytes int) bool {
	if len(p.change.Unchanged) > 0 && len(b.items) > 0 {
		return false // range conditions commit alone
	}
	if len(b.items) == 1 && len(b.items[0].change.Unchanged) > 0 {
		return false
	}
	if b.cmps+len(p.change.Conds) > maxOps || b.ops+len(p.change.Puts)+len(p.change.Deletes) > maxOps {
		return false
	}
	if b.bytes+p.bytes > maxBytes {
		return false
	}
	for _, w := range p.puts {
		if rev, ok := b.guards[w.key]; ok && w.guard && rev == p.condRev(w.key) {
			continue // the same guard at the same revision: written once
		}
		if b.written[w.key] {
			return false
		}
	}
	for _, k := range p.deletes {
		if b.written[k] {
			return false
		}
	}
	return true
}

func (b *batch) add(p *pending) {
	b.items = append(b.items, p)
	b.cmps += len(p.change.Conds)
	b.ops += len(p.change.Puts) + len(p.change.Deletes)
	b.bytes += p.bytes
	for _, w := range p.puts {
		b.written[w.key] = true
		if w.guard {
			if b.guards == nil {
				b.guards = make(map[string]int64)
			}
			b.guards[w.key] = p.condRev(w.key)
		}
	}
	for _, k := range p.deletes {
		b.written[k] = true
	}
}

func (s *Store) work(ctx context.Context) {
	for {
		var p *pending
		select {
		case p = <-s.queue:
		case <-ctx.Done():
			return
		}
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			p.done <- commitResult{err: ctx.Err()}
			return
		}
		s.lead(ctx, p)
		<-s.slots
	}
}

// lead commits p together with the changes queued behind it, holding one
// of the in-flight slots: as many transactions as fit, until a batch ends
// with nothing carried over. Whoever holds a slot leads: a committer, or a
// caller that found a slot free (then the change does not cross to another
// goroutine and back, which at one caller is most of the committer's cost).
func (s *Store) lead(ctx context.Context, p *pending) {
	for p != nil {
		b := &batch{written: make(map[string]bool)}
		b.add(p)
		p = nil
	fill:
		for {
			select {
			case q := <-s.queue:
				if q.ctx.Err() != nil {
					q.done <- commitResult{err: q.ctx.Err()}
					continue
				}
				if !b.fits(q, s.opts.MaxOps, s.opts.MaxBytes) {
					p = q
					break fill
				}
				b.add(q)
			default:
				break fill
			}
		}
		s.commitBatch(ctx, b.items)
	}
}

// commitBatch commits items as one transaction. When it fails on a
// condition, it reads the objects the items compared (a second, read-only
// transaction: failures are rare, and reads carried in every transaction
// would make each one bigger), commits again at once the items whose own
// conditions still hold, and gives the others ErrConflict with the state
// it read.
//
// The request is built as etcd's protobuf message directly: the client's
// operation builders copy every comparison and operation once more, which
// at thousands of allocations a second is a measurable share of the
// garbage the replica makes.
func (s *Store) commitBatch(ctx context.Context, items []*pending) {
	for len(items) > 0 {
		req, err := s.txnRequest(ctx, items)
		if err != nil {
			s.fail(items, err)
			return
		}
		tctx, cancel := s.bounded(ctx)
		start := time.Now()
		kv, route := s.conn.txnKV(tctx)
		resp, err := kv.Txn(tctx, req)
		cancel()
		if took := time.Since(start); err != nil || took > slowTxn {
			s.logger.WarnContext(ctx, "etcd transaction failed or slow", "route", route, "took", took, "changes", len(items), "error", err)
		}
		if err != nil && tooLarge(err) {
			// etcd refused the transaction's size (its limits are lower
			// than Options say, or the estimate fell short): commit the
			// items in halves, and refuse one alone that is still too big.
			if len(items) == 1 {
				s.fail(items, ipam.Refuse(ipam.ErrTooLarge, "the request is larger than one storage transaction may be"))
				return
			}
			s.commitBatch(ctx, items[:len(items)/2])
			s.commitBatch(ctx, items[len(items)/2:])
			return
		}
		if err != nil {
			s.conn.txnFailed(err)
			s.fail(items, fmt.Errorf("store: commit: %w: %w", ipam.ErrUnavailable, err))
			return
		}
		if resp.Succeeded {
			s.remember(items, resp.Header.Revision)
			for _, p := range items {
				p.done <- commitResult{rev: resp.Header.Revision}
			}
			return
		}
		current, err := s.readConds(ctx, items)
		if err != nil {
			s.fail(items, err)
			return
		}
		var again []*pending
		losers := 0
		for _, p := range items {
			var fresh []ipam.Event
			ok := len(p.change.Unchanged) == 0
			for i, c := range p.change.Conds {
				ev := current[p.condKeys[i]]
				fresh = append(fresh, ev)
				if (ev.Value == nil && c.Rev != 0) || (ev.Value != nil && ev.Rev != c.Rev) {
					ok = false
				}
			}
			if ok && len(items) > 1 {
				again = append(again, p)
				continue
			}
			losers++
			p.done <- commitResult{fresh: fresh, err: ipam.ErrConflict}
		}
		if losers == 0 {
			// Every condition holds again (what broke one was undone after
			// the transaction): let the callers plan again rather than
			// loop here.
			for _, p := range again {
				p.done <- commitResult{err: ipam.ErrConflict}
			}
			return
		}
		items = again
	}
}

// txnRequest builds the transaction of items: every item's conditions, then
// every item's writes, the audit records packed one key per tenant (see
// audit.go).
func (s *Store) txnRequest(ctx context.Context, items []*pending) (*etcdserverpb.TxnRequest, error) {
	req := &etcdserverpb.TxnRequest{}
	var packs []*auditPack
	put := func(kind ipam.Kind, k string, b []byte) error {
		put := &etcdserverpb.PutRequest{Key: []byte(k), Value: b}
		if ttl := s.ttlOf(kind); ttl > 0 {
			id, err := s.leaseFor(ctx, ttl)
			if err != nil {
				return err
			}
			put.Lease = int64(id)
		}
		req.Success = append(req.Success, &etcdserverpb.RequestOp{Request: &etcdserverpb.RequestOp_RequestPut{RequestPut: put}})
		return nil
	}
	// Items of one batch often compare the same object at the same
	// revision (their pool): etcd reads the object once per comparison, so
	// each distinct comparison is sent once.
	compared := make(map[string]int64, len(items)*3)
	guarded := make(map[string]bool)
	for _, p := range items {
		for i, c := range p.change.Conds {
			if rev, ok := compared[p.condKeys[i]]; ok && rev == c.Rev {
				continue
			}
			compared[p.condKeys[i]] = c.Rev
			cmp := &etcdserverpb.Compare{Key: []byte(p.condKeys[i]), Result: etcdserverpb.Compare_EQUAL}
			if c.Rev == 0 {
				cmp.Target = etcdserverpb.Compare_CREATE
				cmp.TargetUnion = &etcdserverpb.Compare_CreateRevision{CreateRevision: 0}
			} else {
				cmp.Target = etcdserverpb.Compare_MOD
				cmp.TargetUnion = &etcdserverpb.Compare_ModRevision{ModRevision: c.Rev}
			}
			req.Compare = append(req.Compare, cmp)
		}
		for _, rc := range p.change.Unchanged {
			from, end := rangeKeys(rc)
			req.Compare = append(req.Compare, &etcdserverpb.Compare{
				Key: []byte(from), RangeEnd: []byte(end),
				Target: etcdserverpb.Compare_MOD, Result: etcdserverpb.Compare_LESS,
				TargetUnion: &etcdserverpb.Compare_ModRevision{ModRevision: rc.Since + 1},
			})
		}
		for i, w := range p.puts {
			if rec := w.audit; rec != nil {
				j := slices.IndexFunc(packs, func(pk *auditPack) bool { return pk.tenant == rec.Tenant })
				if j < 0 {
					j = len(packs)
					packs = append(packs, &auditPack{tenant: rec.Tenant})
				}
				packs[j].recs = append(packs[j].recs, rec)
				continue
			}
			if w.guard {
				if guarded[w.key] {
					continue // written once per transaction (see batch.fits)
				}
				guarded[w.key] = true
			}
			if err := put(p.change.Puts[i].Ref.Kind, w.key, w.value); err != nil {
				return nil, err
			}
		}
		for _, k := range p.deletes {
			req.Success = append(req.Success, &etcdserverpb.RequestOp{Request: &etcdserverpb.RequestOp_RequestDeleteRange{
				RequestDeleteRange: &etcdserverpb.DeleteRangeRequest{Key: []byte(k)},
			}})
		}
	}
	for _, pk := range packs {
		r, b, err := packAudit(pk)
		if err != nil {
			return nil, err
		}
		if err := put(ipam.KindAudit, key(r), b); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// readConds reads, in one linearizable read-only transaction, the current
// state of every object the items compared.
func (s *Store) readConds(ctx context.Context, items []*pending) (map[string]ipam.Event, error) {
	var reads []clientv3.Op
	var refs []ipam.Ref
	seen := make(map[string]bool)
	var keys []string
	for _, p := range items {
		for i, c := range p.change.Conds {
			if k := p.condKeys[i]; !seen[k] {
				seen[k] = true
				reads = append(reads, clientv3.OpGet(k))
				refs = append(refs, c.Ref)
				keys = append(keys, k)
			}
		}
	}
	current := make(map[string]ipam.Event, len(reads))
	if len(reads) == 0 {
		return current, nil
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	resp, err := s.client.Txn(ctx).Then(reads...).Commit()
	if err != nil {
		return nil, fmt.Errorf("store: read after conflict: %w: %w", ipam.ErrUnavailable, err)
	}
	for i, r := range resp.Responses {
		ref := refs[i]
		ev := ipam.Event{Ref: ref, Rev: resp.Header.Revision}
		if kvs := r.GetResponseRange().GetKvs(); len(kvs) > 0 {
			v, err := decode(ref.Kind, kvs[0].Value)
			if err != nil {
				return nil, err
			}
			ev.Value, ev.Rev = v, kvs[0].ModRevision
		}
		current[keys[i]] = ev
	}
	return current, nil
}

func (s *Store) fail(items []*pending, err error) {
	for _, p := range items {
		p.done <- commitResult{err: err}
	}
}

func (s *Store) ttlOf(k ipam.Kind) time.Duration {
	switch k {
	case ipam.KindAudit:
		return s.opts.AuditTTL
	case ipam.KindRequest:
		return s.opts.RequestTTL
	case ipam.KindShare, ipam.KindTenantGuard:
		return s.opts.GuardTTL
	}
	return 0
}

// rangeKeys returns the key range of a range condition.
func rangeKeys(rc ipam.RangeCond) (from, end string) {
	if rc.From.ID == "" && rc.To.ID == "" {
		p := kindPrefix(rc.From.Kind)
		return p, clientv3.GetPrefixRangeEnd(p)
	}
	return key(rc.From), key(rc.To) + "\x00"
}

// tooLarge reports etcd's (or gRPC's) refusal of a transaction for its size
// or its number of operations.
func tooLarge(err error) bool {
	desc := rpctypes.ErrorDesc(err)
	if desc == rpctypes.ErrorDesc(rpctypes.ErrGRPCRequestTooLarge) || desc == rpctypes.ErrorDesc(rpctypes.ErrGRPCTooManyOps) {
		return true
	}
	// gRPC's own bound on a message (etcd's is --max-request-bytes plus
	// 512 KiB; the client's 2 MiB by default).
	return status.Code(err) == codes.ResourceExhausted && strings.Contains(desc, "larger than max")
}
