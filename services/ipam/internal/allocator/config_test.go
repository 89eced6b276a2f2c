package allocator_test

import (
	"errors"
	"testing"
	"time"

	"github.com/beaconlb/beacon/services/ipam/internal/allocator"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// A config object used by an object past the first page of its users is
// in use all the same: the check reads every page.
func TestDeleteConfigReadsEveryUser(t *testing.T) {
	st, ctx := startStore(t)
	a := allocator.New(loaded(t, ctx, st), st, discard(), allocator.Options{ListPage: 2})
	stamp := func(string, time.Time) {}
	bfd := ipam.Ref{Kind: ipam.KindBFDProfile, ID: "t/fast"}
	if _, err := a.CreateConfig(ctx, bfd, &ipam.BFDProfile{Tenant: "t", ID: "fast"}, stamp, false, allocator.Meta{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*ipam.BGPPeer{{Tenant: "t", ID: "p1"}, {Tenant: "t", ID: "p2"}, {Tenant: "t", ID: "p3"}, {Tenant: "t", ID: "p4", BFDProfile: "fast"}} {
		if _, err := a.CreateConfig(ctx, ipam.Ref{Kind: ipam.KindBGPPeer, ID: "t/" + p.ID}, p, stamp, false, allocator.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	inUse := func(v any) bool { return v.(*ipam.BGPPeer).BFDProfile == "fast" }
	err := a.DeleteConfig(ctx, bfd, 0, ipam.KindBGPPeer, inUse, allocator.Meta{})
	if !errors.Is(err, ipam.ErrInUse) {
		t.Fatalf("delete of a profile peer p4 uses = %v, want ErrInUse", err)
	}
	if _, err := st.Get(ctx, bfd); err != nil {
		t.Errorf("profile after the refused delete: %v", err)
	}
}
