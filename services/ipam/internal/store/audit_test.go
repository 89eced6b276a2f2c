package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

func auditChange(t *testing.T, tenant, id, owner string) *pending {
	t.Helper()
	rec := &ipam.AuditRecord{Tenant: tenant, ID: id, Time: time.Unix(0, 0).UTC(), Action: ipam.ActionAllocate, Owner: owner}
	ch := ipam.Change{Puts: []ipam.Put{{Ref: ipam.Ref{Kind: ipam.KindAudit, ID: tenant + "/" + id}, Value: rec}}}
	prep, err := prepare(ch)
	if err != nil {
		t.Fatal(err)
	}
	return &pending{change: ch, prepared: prep, done: make(chan commitResult, 1)}
}

// The audit records of one transaction share one key per tenant, and
// listing them, a page of one at a time, gives every record exactly once in
// ID order, across packed and single keys.
func TestAuditPacksListAndResume(t *testing.T) {
	s, ctx := newStore(t)
	// One transaction: three records of tenant a (not in ID order), one of
	// tenant b.
	batch := []*pending{
		auditChange(t, "a", "0002cccc", "a2"), auditChange(t, "b", "0002bbbb", "b1"),
		auditChange(t, "a", "0002aaaa", "a1"), auditChange(t, "a", "0002dddd", "a3"),
	}
	s.commitBatch(ctx, batch)
	// Two transactions of one record each, around it in ID order.
	single1, single2 := []*pending{auditChange(t, "a", "0001ffff", "a0")}, []*pending{auditChange(t, "a", "0003ffff", "a4")}
	s.commitBatch(ctx, single1)
	s.commitBatch(ctx, single2)
	for _, p := range append(append(batch, single1...), single2...) {
		if r := <-p.done; r.err != nil {
			t.Fatalf("commit: %v", r.err)
		}
	}

	resp, err := s.client.Get(ctx, auditPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	wantKeys := []string{auditPrefix + "a/0001ffff", auditPrefix + "a/0002aaaa", auditPrefix + "a/0003ffff", auditPrefix + "b/0002bbbb"}
	if diff := cmp.Diff(wantKeys, keys); diff != "" {
		t.Fatalf("audit keys (-want +got):\n%s", diff)
	}

	want := []string{"a/0001ffff a0", "a/0002aaaa-000 a1", "a/0002aaaa-001 a2", "a/0002aaaa-002 a3", "a/0003ffff a4", "b/0002bbbb b1"}
	for _, limit := range []int{1, 2, 100} {
		var got []string
		after := ""
		for range 20 {
			page, err := s.List(ctx, ipam.KindAudit, "", after, limit, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range page.Items {
				got = append(got, fmt.Sprintf("%s %s", ev.Ref.ID, ev.Value.(*ipam.AuditRecord).Owner))
				after = ev.Ref.ID
			}
			if !page.More {
				break
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("listing %d keys at a time (-want +got):\n%s", limit, diff)
		}
	}
	// Resuming inside a pack gives its later records, then the next keys.
	page, err := s.List(ctx, ipam.KindAudit, "a/", "a/0002aaaa-000", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range page.Items {
		got = append(got, ev.Ref.ID)
	}
	if diff := cmp.Diff([]string{"a/0002aaaa-001", "a/0002aaaa-002", "a/0003ffff"}, got); diff != "" {
		t.Errorf("resume inside a pack (-want +got):\n%s", diff)
	}
}

// Audit records are kept Options.AuditTTL (ipamd's --audit-retention): each
// key carries a lease that etcd ends, deleting the key, between AuditTTL
// and AuditTTL+1h after it was written (keys written within the hour share
// one lease).
func TestAuditRetention(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		want time.Duration
	}{
		{"default", 0, 30*24*time.Hour + time.Hour},
		{"a day", 24 * time.Hour, 25 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx := newStore(t)
			if tc.ttl > 0 {
				s = New(s.conn, s.logger, Options{AuditTTL: tc.ttl})
			}
			p := auditChange(t, "a", "0001aaaa", "a1")
			s.commitBatch(ctx, []*pending{p})
			if r := <-p.done; r.err != nil {
				t.Fatalf("commit: %v", r.err)
			}
			resp, err := s.client.Get(ctx, auditPrefix, clientv3.WithPrefix())
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("audit keys: %v, %v", resp, err)
			}
			lease := clientv3.LeaseID(resp.Kvs[0].Lease)
			if lease == 0 {
				t.Fatal("audit key has no lease: it would be kept forever")
			}
			ttl, err := s.client.TimeToLive(ctx, lease)
			if err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(ttl.GrantedTTL) * time.Second; got != tc.want {
				t.Errorf("audit lease granted %v; want %v", got, tc.want)
			}
		})
	}
}
