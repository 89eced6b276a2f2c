package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
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
	next.OwnerLabels = selector.SetOf(map[string]string{"app": "web"})
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

// CreationRecords pages through the same records, in the same order, as a
// walk of every allocation would, across random creations, renewals (the
// same record kept), deletions and reloads, for every prefix and page size.
func TestCreationRecordsMatchAWalk(t *testing.T) {
	rnd := rand.New(rand.NewPCG(18, 1))
	x := New()
	live := map[string]*ipam.Allocation{} // by "tenant/id"
	rev := int64(1)
	tenants := []string{"t1", "t10", "t1a", "t2"}
	put := func(a *ipam.Allocation) {
		rev++
		x.Apply([]ipam.Event{{Ref: ipam.Ref{Kind: ipam.KindAllocation, ID: a.Tenant + "/" + a.ID}, Value: a, Rev: rev}}, 0)
		live[a.Tenant+"/"+a.ID] = a
	}
	walk := func(prefix, after string) []string {
		var out []string
		for _, a := range live {
			if a.Created == nil {
				continue
			}
			if id := a.Tenant + "/" + a.Created.AuditID; id > after && strings.HasPrefix(id, prefix) {
				out = append(out, id+" "+a.Owner)
			}
		}
		slices.Sort(out)
		return out
	}
	pages := func(prefix string, limit int) []string {
		var out []string
		after := ""
		for range 1000 {
			recs, more := x.CreationRecords(prefix, after, limit)
			for _, r := range recs {
				out = append(out, r.Tenant+"/"+r.ID+" "+r.Owner)
				after = r.Tenant + "/" + r.ID
			}
			if !more {
				return out
			}
		}
		t.Fatalf("prefix %q limit %d: more than 1000 pages", prefix, limit)
		return nil
	}
	for step := range 600 {
		switch op := rnd.IntN(10); {
		case op < 5 || len(live) == 0: // a new allocation, most with a record
			n := step
			a := &ipam.Allocation{Tenant: tenants[rnd.IntN(len(tenants))], ID: fmt.Sprintf("a%04d", n), Owner: fmt.Sprintf("o%04d", n)}
			if rnd.IntN(5) > 0 {
				a.Created = &ipam.Creation{AuditID: fmt.Sprintf("%04x", rnd.IntN(1<<16)), Actor: "alice"}
			}
			put(a)
		case op < 8: // a renewal or update: a new value, the same record
			for _, a := range live {
				b := *a
				b.UpdateTime = time.Unix(int64(step), 0)
				put(&b)
				break
			}
		default: // a deletion
			for k, a := range live {
				rev++
				x.Apply([]ipam.Event{{Ref: ipam.Ref{Kind: ipam.KindAllocation, ID: a.Tenant + "/" + a.ID}, Rev: rev}}, 0)
				delete(live, k)
				break
			}
		}
		if step%150 == 149 { // a reload from what is live
			var evs []ipam.Event
			for k, a := range live {
				evs = append(evs, ipam.Event{Ref: ipam.Ref{Kind: ipam.KindAllocation, ID: k}, Value: a, Rev: rev})
			}
			x.Replace(evs, rev)
		}
		if step%50 != 49 {
			continue
		}
		// A record deleted right after a listing sorted the IDs: its ID
		// lingers in them until a new one comes.
		pages("", 1000)
		for k, a := range live {
			if a.Created != nil {
				rev++
				x.Apply([]ipam.Event{{Ref: ipam.Ref{Kind: ipam.KindAllocation, ID: k}, Rev: rev}}, 0)
				delete(live, k)
				break
			}
		}
		for _, prefix := range []string{"", "t1", "t1/", "t10/", "t1a/", "t2/", "t1/8"} {
			for _, limit := range []int{1, 3, 100} {
				if diff := cmp.Diff(walk(prefix, ""), pages(prefix, limit)); diff != "" {
					t.Fatalf("step %d, prefix %q, pages of %d: -walk +pages\n%s", step, prefix, limit, diff)
				}
			}
		}
	}
}
