package store

import (
	"maps"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// interner makes equal strings of a load share one copy: a million
// allocations name a hundred tenants, a few pools and namespaces, and the
// same label keys and values over and over, and each decoded copy costs
// its own allocation. It holds what it saw only while the load lasts.
type interner map[string]string

func (in interner) str(p *string) {
	if *p == "" {
		return
	}
	if s, ok := in[*p]; ok {
		*p = s
		return
	}
	in[*p] = *p
}

func (in interner) labels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range maps.All(m) {
		in.str(&k)
		in.str(&v)
		out[k] = v
	}
	return out
}

// value interns the strings of a decoded state object that repeat across
// objects (never IDs, owners or UIDs, which do not).
func (in interner) value(v any) {
	switch v := v.(type) {
	case *ipam.Allocation:
		in.allocation(v)
	case *ipam.Hold:
		in.allocation(&v.Allocation)
	case *ipam.Claim:
		in.str(&v.Pool)
		in.str(&v.Tenant)
		in.str(&v.Group)
		for i := range v.Holders {
			in.str(&v.Holders[i].Tenant)
		}
	}
}

func (in interner) allocation(a *ipam.Allocation) {
	in.str(&a.Tenant)
	in.str(&a.Namespace)
	in.str(&a.Pool)
	in.str(&a.RequestedPool)
	in.str(&a.GlobalGroup)
	for i := range a.EndpointNodes {
		in.str(&a.EndpointNodes[i])
	}
	a.OwnerLabels = in.labels(a.OwnerLabels)
	a.NamespaceLabels = in.labels(a.NamespaceLabels)
	if a.Created != nil {
		in.str(&a.Created.Actor)
	}
}
