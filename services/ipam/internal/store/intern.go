package store

import (
	"encoding/binary"
	"maps"
	"slices"

	"github.com/beaconlb/beacon/services/ipam/internal/ipam"
)

// interner makes equal strings of a load share one copy: a million
// allocations name a hundred tenants, a few pools and namespaces, and the
// same label keys and values over and over, and each decoded copy costs
// its own allocation. Equal label sets share one map too (a namespace's
// labels are the same on each of its allocations, and owners' often
// repeat): a small map costs about 300 bytes, more than the strings in it.
// Nothing writes into a stored allocation's label maps (an update replaces
// them), so sharing them is safe. It holds what it saw only while the load
// lasts.
type interner struct {
	strs   map[string]string
	labels map[string]map[string]string // by labelsKey
	key    []byte                       // labelsKey's buffer
}

func newInterner() *interner {
	return &interner{strs: map[string]string{}, labels: map[string]map[string]string{}}
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

// labelSet returns the shared map equal to m.
func (in *interner) labelSet(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	in.key = labelsKey(in.key[:0], m)
	if s, ok := in.labels[string(in.key)]; ok {
		return s
	}
	out := make(map[string]string, len(m))
	for k, v := range maps.All(m) {
		in.str(&k)
		in.str(&v)
		out[k] = v
	}
	in.labels[string(in.key)] = out
	return out
}

// labelsKey appends to b an encoding of m that equal maps share: its pairs
// in key order, each string preceded by its length.
func labelsKey(b []byte, m map[string]string) []byte {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(m[k])))
		b = append(b, m[k]...)
	}
	return b
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
