package server

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	ipamv1 "github.com/beaconlb/beacon/proto/beacon/ipam/v1"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// FuzzAllocationRequest feeds arbitrary wire bytes, decoded as an
// Allocation, to the request validation: it never panics, every refusal
// names a field of the allocation with a reason, and what it accepts keeps
// the rules the allocator relies on (an owner, printable keys, at most one
// requested address per family, plain addresses, distinct ports in range).
func FuzzAllocationRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		in := &ipamv1.Allocation{}
		if proto.Unmarshal(b, in) != nil {
			return
		}
		var fes ipam.FieldErrors
		a := allocationFromProto(&fes, "t1", in)
		for _, fe := range fes {
			if !strings.HasPrefix(fe.Field, "allocation.") || fe.Reason == "" {
				t.Fatalf("field error %+v does not name an allocation field with a reason", fe)
			}
		}
		if len(fes) > 0 {
			return
		}
		if a.Owner == "" || a.Tenant != "t1" {
			t.Fatalf("accepted an allocation without owner or tenant: %+v", a)
		}
		for _, s := range []string{a.Owner, a.SharingKey, a.OwnerUID} {
			if strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r > '~' }) {
				t.Fatalf("accepted unprintable %q", s)
			}
		}
		fams := map[bool]bool{}
		for _, addr := range a.RequestedAddrs {
			if !addr.IsValid() || addr.Zone() != "" || addr.Is4In6() || fams[addr.Is4()] {
				t.Fatalf("accepted requested addresses %v", a.RequestedAddrs)
			}
			fams[addr.Is4()] = true
		}
		seen := map[ipam.Port]bool{}
		for _, p := range a.Ports {
			if p.Number == 0 || seen[p] {
				t.Fatalf("accepted ports %v", a.Ports)
			}
			seen[p] = true
		}
		if a.FamilyPolicy == ipam.SingleStack && len(a.Families) > 1 {
			t.Fatalf("accepted single-stack with families %v", a.Families)
		}
	})
}

// FuzzPoolRequest does the same for pools: accepted ranges are valid and
// do not overlap one another.
func FuzzPoolRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		in := &ipamv1.Pool{}
		if proto.Unmarshal(b, in) != nil {
			return
		}
		var fes ipam.FieldErrors
		p := poolFromProto(&fes, "pool", "p1", in)
		for _, fe := range fes {
			if !strings.HasPrefix(fe.Field, "pool") || fe.Reason == "" {
				t.Fatalf("field error %+v does not name a pool field with a reason", fe)
			}
		}
		if len(fes) > 0 {
			return
		}
		if len(p.Ranges) == 0 {
			t.Fatal("accepted a pool without ranges")
		}
		for i, r := range p.Ranges {
			if !r.IsValid() {
				t.Fatalf("accepted invalid range %v", r)
			}
			for _, o := range p.Ranges[:i] {
				if r.Overlaps(o) {
					t.Fatalf("accepted overlapping ranges %v and %v", r, o)
				}
			}
		}
		for _, r := range p.Exclusions {
			if !r.IsValid() {
				t.Fatalf("accepted invalid exclusion %v", r)
			}
		}
	})
}
