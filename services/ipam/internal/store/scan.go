package store

import (
	"context"
	"errors"
	"io"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Reading a range of keys a page at a time costs etcd (up to 3.7 at least)
// a walk over every key from the page's start to the range's end, whatever
// the page's limit: a Range request always counts the keys it did not
// return. Over the million keys of a large store, that is tens of
// milliseconds per page, and a load in pages is quadratic (a replica's load
// of 300,000 allocations spent half its CPU there). etcd 3.7's RangeStream
// returns a range in chunks without that count; scan uses it, stopping the
// stream once the caller has what it needs, and falls back to pages on an
// etcd without it.

// errScanDone stops a scan early; scan returns nil for it.
var errScanDone = errors.New("store: scan done")

// scanPage is how many keys one page of the fallback reads.
const scanPage = 5000

// scan calls fn with the keys in [from, end) at revision rev (0: the
// latest, then pinned for the whole scan), in key order, a chunk at a time,
// until the range ends or fn returns errScanDone. want, if positive, is
// about how many keys the caller needs (the fallback's page size). It
// returns the revision read at.
func (c *Client) scan(ctx context.Context, from, end string, rev int64, want int, fn func(kvs []*mvccpb.KeyValue) error) (int64, error) {
	req := &etcdserverpb.RangeRequest{Key: []byte(from), RangeEnd: []byte(end), Revision: rev}
	var err error
	switch {
	case c.kvServer != nil:
		rev, err = c.scanInProcess(ctx, req, fn)
	case !c.noStream.Load():
		rev, err = c.scanStream(ctx, req, fn)
		if status.Code(err) == codes.Unimplemented {
			c.noStream.Store(true) // an etcd before 3.7
			return c.scanPages(ctx, from, end, rev, want, fn)
		}
	default:
		return c.scanPages(ctx, from, end, rev, want, fn)
	}
	if errors.Is(err, errScanDone) {
		err = nil
	}
	return rev, err
}

// scanStream reads with RangeStream over the network.
func (c *Client) scanStream(ctx context.Context, req *etcdserverpb.RangeRequest, fn func([]*mvccpb.KeyValue) error) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream when fn stopped it early
	// Chunks aim at etcd's request size (1.5 MiB by default) and may reach
	// twice that: more than gRPC's default 4 MiB with larger settings.
	stream, err := c.kv.RangeStream(ctx, req, grpc.MaxCallRecvMsgSize(64<<20))
	if err != nil {
		return 0, err
	}
	rev := req.Revision
	for {
		resp, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return rev, nil
			}
			return rev, err
		}
		r := resp.GetRangeResponse()
		if r == nil {
			continue
		}
		if h := r.GetHeader(); h != nil && h.Revision > 0 && rev == 0 {
			rev = h.Revision
		}
		if len(r.Kvs) > 0 {
			if err := fn(r.Kvs); err != nil {
				return rev, err
			}
		}
	}
}

// scanInProcess reads with RangeStream from an etcd server in this
// process, whose chunks it is handed one by one.
func (c *Client) scanInProcess(ctx context.Context, req *etcdserverpb.RangeRequest, fn func([]*mvccpb.KeyValue) error) (int64, error) {
	rs := &inProcessRangeStream{ctx: ctx, fn: fn, rev: req.Revision}
	err := c.kvServer.RangeStream(req, rs)
	if rs.err != nil {
		err = rs.err
	}
	return rs.rev, err
}

// inProcessRangeStream is the server side of a RangeStream called in
// process: each chunk etcd sends goes to fn.
type inProcessRangeStream struct {
	grpc.ServerStream // never called: only Context and Send are
	ctx               context.Context
	fn                func([]*mvccpb.KeyValue) error
	rev               int64
	err               error
}

func (s *inProcessRangeStream) Context() context.Context { return s.ctx }

func (s *inProcessRangeStream) Send(resp *etcdserverpb.RangeStreamResponse) error {
	r := resp.GetRangeResponse()
	if r == nil {
		return nil
	}
	if h := r.GetHeader(); h != nil && h.Revision > 0 && s.rev == 0 {
		s.rev = h.Revision
	}
	if len(r.Kvs) == 0 {
		return nil
	}
	if err := s.fn(r.Kvs); err != nil {
		s.err = err
		return err
	}
	return nil
}

// scanPages reads with Range a page at a time, at one revision: the way
// for an etcd without RangeStream.
func (c *Client) scanPages(ctx context.Context, from, end string, rev int64, want int, fn func([]*mvccpb.KeyValue) error) (int64, error) {
	page := int64(scanPage)
	if want > 0 {
		page = int64(min(want, scanPage))
	}
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(page)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := c.etcd.Get(ctx, from, opts...)
		if err != nil {
			return rev, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		if len(resp.Kvs) > 0 {
			if err := fn(resp.Kvs); err != nil {
				if errors.Is(err, errScanDone) {
					err = nil
				}
				return rev, err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
