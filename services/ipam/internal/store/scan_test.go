package store

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// Every way scan reads (RangeStream in process, RangeStream over the
// network, and pages for an etcd without RangeStream) returns the same
// keys, in order, at the revision it pinned (writes during the scan are not
// seen), and stops when told; Store.List and LoadState over each agree.
func TestScanWays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	emb, err := StartEmbedded(ctx, EmbeddedConfig{Dir: t.TempDir(), LogLevel: "fatal"})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	remote, err := Dial(ctx, DialConfig{Endpoints: emb.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = remote.Close() }()
	inProcess := emb.Client()
	defer func() { _ = inProcess.Close() }()
	paged, err := Dial(ctx, DialConfig{Endpoints: emb.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = paged.Close() }()
	paged.noStream.Store(true)

	// 12,000 allocations (more than a fallback page), written in
	// transactions of 100.
	const n = 12_000
	var want []string
	for i := 0; i < n; i += 100 {
		txn := remote.etcd.Txn(ctx)
		var ops []clientv3.Op
		for j := i; j < i+100; j++ {
			id := fmt.Sprintf("t/a%06d", j)
			want = append(want, id)
			ops = append(ops, clientv3.OpPut(key(ipam.Ref{Kind: ipam.KindAllocation, ID: id}), fmt.Sprintf(`{"tenant":"t","id":"a%06d","addrs":[]}`, j)))
		}
		if _, err := txn.Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := New(remote, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{}).Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Written after rev: no scan at rev may see it.
	if _, err := remote.etcd.Put(ctx, key(ipam.Ref{Kind: ipam.KindAllocation, ID: "t/a000000x"}), `{"tenant":"t","id":"a000000x","addrs":[]}`); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		client *Client
	}{{"in process", inProcess}, {"network", remote}, {"pages", paged}} {
		t.Run(tc.name, func(t *testing.T) {
			ids := func(kvs []*mvccpb.KeyValue) []string {
				var out []string
				for _, kv := range kvs {
					r, _ := parseKey(string(kv.Key))
					out = append(out, r.ID)
				}
				return out
			}
			var got []string
			gotRev, err := tc.client.scan(ctx, allocsPrefix, allocsPrefix+"\xff", rev, 0, func(kvs []*mvccpb.KeyValue) error {
				got = append(got, ids(kvs)...)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" || gotRev != rev {
				t.Errorf("full scan at %d (got rev %d): -want +got\n%s", rev, gotRev, diff)
			}

			// Stopped early: no more chunks after errScanDone.
			calls := 0
			if _, err := tc.client.scan(ctx, allocsPrefix, allocsPrefix+"\xff", rev, 10, func([]*mvccpb.KeyValue) error {
				calls++
				return errScanDone
			}); err != nil || calls != 1 {
				t.Errorf("stopped scan: %d calls, error %v; want 1 call, no error", calls, err)
			}

			st := New(tc.client, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{})
			// Pages of 500 after a1000, at rev, then the last one.
			for _, pc := range []struct {
				after string
				limit int
				want  []string
				more  bool
			}{
				{"t/a001000", 500, want[1001:1501], true},
				{"t/a011499", 500, want[11500:], false},
				{"t/a011999", 500, nil, false},
			} {
				page, err := st.List(ctx, ipam.KindAllocation, "t/", pc.after, pc.limit, rev)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, ev := range page.Items {
					got = append(got, ev.Ref.ID)
				}
				if diff := cmp.Diff(pc.want, got); diff != "" || page.More != pc.more || page.Revision != rev {
					t.Errorf("List after %s: more %v (want %v), rev %d (want %d), -want +got\n%s", pc.after, page.More, pc.more, page.Revision, rev, diff)
				}
			}
			events, loadRev, err := st.LoadState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(events) != n+1 || loadRev <= rev {
				t.Errorf("LoadState: %d objects at %d; want %d at a revision after %d", len(events), loadRev, n+1, rev)
			}
		})
	}
}
