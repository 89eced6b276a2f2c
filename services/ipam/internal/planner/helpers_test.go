package planner

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/beaconlb/beacon/services/ipam/internal/addrspace"
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

const tenant = "t1"

// planOpts compares plans: nil and empty slices are equal, and routes as
// lists however they are chunked.
func planOpts() cmp.Options {
	return cmp.Options{cmpopts.EquateEmpty(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
		cmp.Transformer("Slice", ipam.Routes.Slice)}
}

// labels builds a label map from "k=v" pairs.
func labels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// sel is a selector matching the "k", "v" pairs.
func sel(kv ...string) selector.Selector { return selector.Selector{MatchLabels: labels(kv...)} }

// sels is a list of one selector matching the pairs.
func sels(kv ...string) []selector.Selector { return []selector.Selector{sel(kv...)} }

// node is a live node with eth0 up and the given labels.
func node(name string, kv ...string) *ipam.Node {
	return &ipam.Node{Tenant: tenant, Name: name, Live: true, Labels: labels(kv...),
		Interfaces: []ipam.Interface{{Name: "eth0", Up: true}}}
}

func mustRange(t testing.TB, s string) addrspace.Range {
	t.Helper()
	r, err := addrspace.ParseRange(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// pool is a pool with the ranges and labels.
func pool(t testing.TB, name string, ranges []string, kv ...string) *ipam.Pool {
	p := &ipam.Pool{Name: name, Labels: labels(kv...)}
	for _, r := range ranges {
		p.Ranges = append(p.Ranges, mustRange(t, r))
	}
	return p
}

// pools indexes pools by name.
func pools(ps ...*ipam.Pool) map[string]*ipam.Pool {
	m := map[string]*ipam.Pool{}
	for _, p := range ps {
		m[p.Name] = p
	}
	return m
}

// alloc is an allocation of the addresses from pool.
func alloc(id, pool string, addrs ...string) *ipam.Allocation {
	a := &ipam.Allocation{Tenant: tenant, ID: id, Owner: "ns/" + id, Pool: pool}
	for _, s := range addrs {
		a.Addrs = append(a.Addrs, netip.MustParseAddr(s))
	}
	return a
}

// local makes a LOCAL with endpoints on the nodes.
func local(a *ipam.Allocation, nodes ...string) *ipam.Allocation {
	a.TrafficPolicy = ipam.TrafficLocal
	a.EndpointNodes = nodes
	return a
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// ownersOf returns, for each address, the nodes whose plan answers for it.
func ownersOf(plans map[string]*ipam.NodePlan) map[netip.Addr][]string {
	m := map[netip.Addr][]string{}
	for name, p := range plans {
		for _, l := range p.L2 {
			m[l.Addr] = append(m[l.Addr], name)
		}
	}
	for _, v := range m {
		slices.Sort(v)
	}
	return m
}

// applyAll applies deltas to a copy of plans.
func applyAll(plans map[string]*ipam.NodePlan, deltas map[string]*Delta) map[string]*ipam.NodePlan {
	out := map[string]*ipam.NodePlan{}
	for name, p := range plans {
		out[name] = p
	}
	for name, d := range deltas {
		out[name] = Apply(out[name], d)
	}
	return out
}

// withAllocs returns a shallow copy of in with other allocations.
func withAllocs(in *Input, allocs []*ipam.Allocation) *Input {
	c := *in
	c.Allocations = allocs
	return &c
}

// withOwners returns a shallow copy of in with other sticky owners.
func withOwners(in *Input, owners map[netip.Addr]string) *Input {
	c := *in
	c.L2Owners = owners
	return &c
}
