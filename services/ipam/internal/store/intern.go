package store

import (
	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
	"github.com/beaconlb/beacon/services/ipam/internal/selector"
)

// interner makes equal strings of a load share one copy: a million
// allocations name a hundred tenants, a few pools and namespaces over and
// over, and each decoded copy costs its own allocation. Equal label sets
// share one set (a namespace's labels are the same on each of its
// allocations, and owners' often repeat); sets are immutable, so sharing
// them is safe. It holds what it saw only while the load lasts.
type interner struct {
	strs   map[string]string
	labels map[string]selector.Set // by Set.Key
}

func newInterner() *interner {
	return &interner{strs: map[string]string{}, labels: map[string]selector.Set{}}
}

func (in *interner) str(p *string) {
	if *p == "" {
		return
	}
	if s, ok := in.strs[*p]; ok {
		*p = s
		return
	}
	in.strs[*p] = *p
}

// labelSet returns the shared set equal to s.
func (in *interner) labelSet(s selector.Set) selector.Set {
	if s.IsZero() {
		return s
	}
	if shared, ok := in.labels[s.Key()]; ok {
		return shared
	}
	in.labels[s.Key()] = s
	return s
}

// value interns the strings of a decoded state object that repeat across
// objects (never IDs, owners or UIDs, which do not).
func (in *interner) value(v any) {
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

func (in *interner) allocation(a *ipam.Allocation) {
	in.str(&a.Tenant)
	in.str(&a.Namespace)
	in.str(&a.Pool)
	in.str(&a.RequestedPool)
	in.str(&a.GlobalGroup)
	for i := range a.EndpointNodes {
		in.str(&a.EndpointNodes[i])
	}
	a.OwnerLabels = in.labelSet(a.OwnerLabels)
	a.NamespaceLabels = in.labelSet(a.NamespaceLabels)
	if a.Created != nil {
		in.str(&a.Created.Actor)
	}
}
