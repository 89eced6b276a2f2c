package index

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// The record of an allocation's creation lives in the allocation: listed
// from the index while it lives, kept by updates and renewals, and written
// to the log, under its own key and ID, by the change that ends it.
func TestCreationRecordLife(t *testing.T) {
	x := New()
	x.Apply([]ipam.Event{poolEvent(pool(t, "web", "192.0.2.0/30"), 1)}, 1)
	created := func(id string) func(*ipam.Allocation) {
		return func(a *ipam.Allocation) {
			a.Created = &ipam.Creation{AuditID: id, Actor: "alice", RequestID: "r-" + id}
		}
	}
	a := allocate(t, x, "a", created("0002"), func(a *ipam.Allocation) { a.TTL = time.Hour })
	commit(t, x, a, 2)
	b := allocate(t, x, "b", created("0001"))
	commit(t, x, b, 3)
	commit(t, x, allocate(t, x, "old"), 4) // created before records were kept: nothing listed

	ids := func(prefix, after string) []string {
		recs, more := x.CreationRecords(prefix, after, 10)
		if more {
			t.Errorf("more than 10 records after %q", after)
		}
		var out []string
		for _, r := range recs {
			out = append(out, r.Tenant+"/"+r.ID+" "+r.Owner+" "+r.Actor)
		}
		return out
	}
	want := []string{"c1/0001 b alice", "c1/0002 a alice"}
	if diff := cmp.Diff(want, ids("c1/", "")); diff != "" {
		t.Fatalf("records (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[1:], ids("", "c1/0001")); diff != "" {
		t.Fatalf("records after c1/0001 (-want +got):\n%s", diff)
	}
	if got := ids("c2/", ""); got != nil {
		t.Fatalf("another tenant's records: %v", got)
	}
	if recs, more := x.CreationRecords("c1/", "", 1); len(recs) != 1 || recs[0].ID != "0001" || !more {
		t.Fatalf("first record of a limit of 1: %v, more %v; want 0001 and more", recs, more)
	}

	renew, err := planRenew(x, "c1", a.Alloc.ID, 0, 2*time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, x, renew, 5)
	next := *renew.Alloc
	next.Created = nil // a caller cannot drop it
	next.OwnerLabels = map[string]string{"app": "web"}
	upd, err := planUpdate(x, "c1", a.Alloc.ID, 0, &next, t0)
	if err != nil {
		t.Fatal(err)
	}
	commit(t, x, upd, 6)
	if diff := cmp.Diff(want, ids("c1/", "")); diff != "" {
		t.Fatalf("records after renew and update (-want +got):\n%s", diff)
	}

	// Released with a hold: the record goes to the log, not into the hold.
	rel, err := planRelease(x, "c1", a.Alloc.ID, 0, time.Minute, t0)
	if err != nil {
		t.Fatal(err)
	}
	var logged []ipam.Put
	for _, p := range rel.Change.Puts {
		switch v := p.Value.(type) {
		case *ipam.AuditRecord:
			logged = append(logged, p)
		case *ipam.Hold:
			if v.Allocation.Created != nil {
				t.Error("the hold keeps the creation record")
			}
		}
	}
	wantPut := []ipam.Put{{
		Ref: ipam.Ref{Kind: ipam.KindAudit, ID: "c1/0002"}, Alone: true,
		Value: &ipam.AuditRecord{
			Tenant: "c1", ID: "0002", Time: t0, Action: ipam.ActionAllocate, Actor: "alice", RequestID: "r-0002",
			Allocation: a.Alloc.ID, Owner: "a", Addrs: a.Alloc.Addrs, Pool: "web",
		},
	}}
	if diff := cmp.Diff(wantPut, logged, addrCmp); diff != "" {
		t.Fatalf("audit writes of the release (-want +got):\n%s", diff)
	}
	commit(t, x, rel, 7)
	if diff := cmp.Diff(want[:1], ids("c1/", "")); diff != "" {
		t.Fatalf("records after the release (-want +got):\n%s", diff)
	}
}
