package robustness

import (
	"fmt"
	"hash/maphash"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// maxOwners bounds the owners of one pool, so that a pool's state is a
// fixed-size value: comparable with ==, cheap to copy and to hash.
const maxOwners = 12

// Pool is one pool of the workload and the owners that draw from it. Each
// pool is a partition of the history: owners never leave their pool, so
// the pools are checked one by one.
type Pool struct {
	Name   string       // pool ID, "r-plain"
	V4, V6 []netip.Addr // every address of the pool, by family
	Owners []Owner
}

// Owner is one owner's fixed request: every Allocate it makes asks for the
// same thing, so that the model knows what each owner may be given.
type Owner struct {
	Name string
	// Key and Ports: owners with the same Key and disjoint Ports may share
	// an address.
	Key   string
	Ports []int32
	// Dual asks for one IPv4 and one IPv6 address (require-dual-stack);
	// otherwise one IPv4 address.
	Dual bool
	// Requested are specific addresses asked for (one per family).
	Requested []netip.Addr
	// TTL, if set, makes the allocation free itself unless renewed.
	TTL time.Duration
	// Hold is the hold a Release of this owner may ask for (0: none).
	Hold time.Duration
}

// Kind is an operation of the history.
type Kind uint8

// The operations.
const (
	OpAllocate Kind = iota + 1
	OpRelease
	OpRenew
	OpUpdate
	OpGet
	// OpReplay re-sends an earlier request with its request_id: it must
	// change nothing (its answer is checked against the first one apart).
	OpReplay
)

func (k Kind) String() string {
	return [...]string{"?", "allocate", "release", "renew", "update", "get", "replay"}[k]
}

// Input is what a client asked. Times are wall-clock Unix nanoseconds (the
// server's expire times are compared with them).
type Input struct {
	Pool  int // index in the workload's pools
	Owner int // index in the pool's owners
	Kind  Kind
	// Hold asked for by a Release.
	Hold time.Duration
	// RequestID, when set, makes retries of the operation one operation.
	RequestID string
	// CallWall and ReturnWall bound when the operation took effect: the
	// first attempt's call, the answer's return (for an unknown outcome,
	// the end of the window in which it may still take effect).
	CallWall, ReturnWall int64
}

// Outcome classifies an answer.
type Outcome uint8

// The outcomes.
const (
	// OK: the call succeeded.
	OK Outcome = iota + 1
	// Refused: a definite refusal that changed nothing (Code says which).
	Refused
	// Unknown: no answer, or one that does not say whether the change
	// was made (a time-out, a lost connection, storage unavailable).
	Unknown
)

// Output is what a client was told.
type Output struct {
	Outcome Outcome
	// Code is a refusal's reason (POOL_EXHAUSTED, NOT_FOUND, ...).
	Code string
	// Addrs are the allocation's (or the released) addresses.
	Addrs []netip.Addr
	// Created reports an Allocate that made the allocation.
	Created bool
	// Expire is the allocation's expire time, or a release's hold end
	// (Unix nanoseconds; 0: none).
	Expire int64
}

// The refusal reasons the model knows (the IPAM's ErrorInfo reasons).
const (
	CodeExhausted  = "POOL_EXHAUSTED"
	CodeInUse      = "ADDRESS_IN_USE"
	CodeNotFound   = "NOT_FOUND"
	CodeContention = "CONTENTION"
	CodeNoTTL      = "NO_TTL"
)

// ownerState is what the model knows of one owner. A TTL or a hold whose
// end has passed may or may not have been acted on yet: the model keeps it
// until an answer shows it gone (an answer that needs it gone is allowed
// once its earliest end has passed).
type ownerState struct {
	alloc     bool
	addrs     [2]netip.Addr // IPv4 first; zero where none
	expLo     int64         // earliest TTL end (0: no TTL)
	held      bool
	heldAddrs [2]netip.Addr
	holdLo    int64 // hold end (earliest)
}

// poolState is one pool's state in the model.
type poolState [maxOwners]ownerState

// Model checks one pool's history: the owners' allocations and holds.
// It is nondeterministic: an operation whose outcome is unknown may have
// taken effect in any way the allocator could have made it.
type Model struct {
	pools []Pool
}

// NewModel returns the model of a workload's pools.
func NewModel(pools []Pool) *Model { return &Model{pools: pools} }

// Porcupine returns the model in porcupine's terms, partitioned by pool.
func (m *Model) Porcupine() porcupine.Model {
	seed := maphash.MakeSeed()
	nd := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			parts := make([][]porcupine.Operation, len(m.pools))
			for _, op := range history {
				in := op.Input.(Input)
				parts[in.Pool] = append(parts[in.Pool], op)
			}
			return slices.DeleteFunc(parts, func(p []porcupine.Operation) bool { return len(p) == 0 })
		},
		Init: func() []any { return []any{poolState{}} },
		Step: func(state, input, output any) []any {
			in := input.(Input)
			next := m.step(&m.pools[in.Pool], state.(poolState), in, output.(Output))
			out := make([]any, len(next))
			for i, s := range next {
				out[i] = s
			}
			return out
		},
		Equal: func(a, b any) bool { return a.(poolState) == b.(poolState) },
		Hash:  func(s any) uint64 { return maphash.Comparable(seed, s.(poolState)) },
		DescribeOperation: func(input, output any) string {
			return m.describe(input.(Input), output.(Output))
		},
		DescribeState: func(state any) string { return describeState(state.(poolState)) },
	}
	return nd.ToModel()
}

// step returns the states the pool may be in after the operation, none if
// the answer is impossible from s.
func (m *Model) step(p *Pool, s poolState, in Input, out Output) []poolState {
	o := &p.Owners[in.Owner]
	if out.Outcome == Unknown {
		return m.ghost(p, s, in)
	}
	cur := s[in.Owner]
	// canExpire: the owner's TTL may have run out before the answer.
	canExpire := cur.alloc && cur.expLo != 0 && in.ReturnWall >= cur.expLo
	holdCanEnd := cur.held && in.ReturnWall >= cur.holdLo
	switch in.Kind {
	case OpReplay:
		return []poolState{s}
	case OpAllocate:
		if out.Outcome == Refused {
			return m.allocateRefused(p, s, in, out.Code)
		}
		addrs, ok := pack(out.Addrs)
		if !ok {
			return nil
		}
		if cur.alloc && !out.Created && addrs == cur.addrs {
			s[in.Owner].expLo = out.Expire
			return []poolState{s}
		}
		if !out.Created {
			return nil // told it already held addresses it does not hold
		}
		if cur.alloc {
			if !canExpire {
				return nil
			}
			s[in.Owner].alloc = false // its TTL ran out first
		}
		if cur.held && addrs == cur.heldAddrs {
			s[in.Owner] = ownerState{alloc: true, addrs: addrs, expLo: out.Expire}
			return []poolState{s}
		}
		if cur.held {
			if !holdCanEnd {
				return nil // the owner's hold should have given it its addresses back
			}
			s[in.Owner].held = false
		}
		if !m.fresh(p, &s, in.Owner, addrs, in.ReturnWall) {
			return nil
		}
		s[in.Owner] = ownerState{alloc: true, addrs: addrs, expLo: out.Expire}
		return []poolState{s}
	case OpRelease:
		if out.Outcome == Refused {
			if out.Code != CodeNotFound && out.Code != CodeContention {
				return nil
			}
			if out.Code == CodeNotFound && cur.alloc {
				if !canExpire {
					return nil
				}
				s[in.Owner].alloc = false
			}
			return []poolState{s}
		}
		addrs, ok := pack(out.Addrs)
		if !ok {
			return nil
		}
		switch {
		case cur.alloc && addrs == cur.addrs:
		case !cur.alloc && cur.held && addrs == cur.heldAddrs:
			// Releasing a released owner may end its hold.
		default:
			return nil
		}
		s[in.Owner] = ownerState{}
		if out.Expire != 0 {
			s[in.Owner] = ownerState{held: true, heldAddrs: addrs, holdLo: out.Expire}
		}
		return []poolState{s}
	case OpRenew, OpUpdate, OpGet:
		if out.Outcome == Refused {
			switch {
			case out.Code == CodeContention:
				return []poolState{s}
			case out.Code == CodeNoTTL && in.Kind == OpRenew && o.TTL == 0 && cur.alloc:
				return []poolState{s}
			case out.Code != CodeNotFound:
				return nil
			}
			if cur.alloc {
				if !canExpire {
					return nil
				}
				s[in.Owner].alloc = false
			}
			return []poolState{s}
		}
		addrs, ok := pack(out.Addrs)
		if !ok || !cur.alloc || addrs != cur.addrs {
			return nil
		}
		if in.Kind == OpRenew || in.Kind == OpGet || out.Expire != 0 {
			s[in.Owner].expLo = out.Expire
		}
		return []poolState{s}
	}
	return nil
}

// allocateRefused checks a refused Allocate.
func (m *Model) allocateRefused(p *Pool, s poolState, in Input, code string) []poolState {
	if code == CodeContention {
		return []poolState{s}
	}
	cur := s[in.Owner]
	o := &p.Owners[in.Owner]
	// A refusal means the owner held nothing it could be given back.
	if cur.alloc {
		if cur.expLo == 0 || in.ReturnWall < cur.expLo {
			return nil
		}
		s[in.Owner].alloc = false
	}
	if cur.held {
		if in.ReturnWall < cur.holdLo {
			return nil
		}
		s[in.Owner].held = false
	}
	switch {
	case code == CodeInUse && len(o.Requested) > 0:
		for _, a := range o.Requested {
			if m.takenFrom(p, &s, in.Owner, a) {
				return []poolState{s}
			}
		}
		return nil
	case code == CodeExhausted && len(o.Requested) == 0:
		if m.exhausted(p, &s, in.Owner) {
			return []poolState{s}
		}
		return nil
	}
	return nil
}

// takenFrom reports whether addr is kept from owner i: allocated to an
// owner it may not share with, or held for another owner.
func (m *Model) takenFrom(p *Pool, s *poolState, i int, addr netip.Addr) bool {
	for j := range p.Owners {
		if j == i {
			continue
		}
		st := &s[j]
		if st.alloc && slices.Contains(st.addrs[:], addr) && !compatible(&p.Owners[i], &p.Owners[j]) {
			return true
		}
		if st.held && slices.Contains(st.heldAddrs[:], addr) {
			return true
		}
	}
	return false
}

// exhausted reports whether owner i may have been told that its pool has
// no address for it: the allocator found some family it needs with no
// address free or shareable, and could not take held addresses instead
// because some family it needs has none held for another owner.
func (m *Model) exhausted(p *Pool, s *poolState, i int) bool {
	pickFails, reclaimFails := false, false
	for _, f := range families(&p.Owners[i]) {
		full, held := true, false
		for _, a := range familyAddrs(p, f) {
			if !m.takenFrom(p, s, i, a) {
				full = false
			}
			for j := range p.Owners {
				if st := &s[j]; j != i && st.held && slices.Contains(st.heldAddrs[:], a) {
					held = true
				}
			}
		}
		pickFails = pickFails || full
		reclaimFails = reclaimFails || !held
	}
	return pickFails && reclaimFails
}

func familyAddrs(p *Pool, f int) []netip.Addr {
	if f == 1 {
		return p.V6
	}
	return p.V4
}

// fresh checks that owner i may be given addrs from the pool as a new
// allocation, and applies what it implies to *s: TTLs and holds that must
// have ended, and a hold the allocator took.
func (m *Model) fresh(p *Pool, s *poolState, i int, addrs [2]netip.Addr, ret int64) bool {
	o := &p.Owners[i]
	want := families(o)
	for f := range 2 {
		has := addrs[f].IsValid()
		if has != slices.Contains(want, f) {
			return false
		}
	}
	if len(o.Requested) > 0 {
		req, _ := pack(o.Requested)
		if req != addrs {
			return false
		}
	}
	before := *s
	for f := range 2 {
		a := addrs[f]
		if !a.IsValid() {
			continue
		}
		if !slices.Contains(p.V4, a) && !slices.Contains(p.V6, a) {
			return false
		}
		for j := range p.Owners {
			if j == i {
				continue
			}
			st := &s[j]
			if st.alloc && slices.Contains(st.addrs[:], a) && !compatible(o, &p.Owners[j]) {
				if st.expLo == 0 || ret < st.expLo {
					return false // two owners would hold a
				}
				st.alloc = false // its TTL ran out first
			}
			if st.held && slices.Contains(st.heldAddrs[:], a) {
				// The hold may have ended, or the allocator may take a
				// held address when the pool has nothing else.
				if ret < st.holdLo && (len(o.Requested) > 0 || !m.nothingElse(p, &before, i)) {
					return false
				}
				st.held = false
			}
		}
	}
	return true
}

// nothingElse reports whether some family owner i needs has no address
// free or shareable in s (the allocator then takes held addresses).
func (m *Model) nothingElse(p *Pool, s *poolState, i int) bool {
	for _, f := range families(&p.Owners[i]) {
		full := true
		for _, a := range familyAddrs(p, f) {
			if !m.takenFrom(p, s, i, a) {
				full = false
				break
			}
		}
		if full {
			return true
		}
	}
	return false
}

// ghost returns every state an operation of unknown outcome may have left.
func (m *Model) ghost(p *Pool, s poolState, in Input) []poolState {
	out := []poolState{s}
	cur := s[in.Owner]
	o := &p.Owners[in.Owner]
	ret := in.ReturnWall
	switch in.Kind {
	case OpAllocate:
		base := s
		switch {
		case cur.alloc && (cur.expLo == 0 || ret < cur.expLo):
			return out
		case cur.alloc:
			base[in.Owner].alloc = false
		case cur.held:
			t := s
			t[in.Owner] = ownerState{alloc: true, addrs: cur.heldAddrs}
			if o.TTL > 0 {
				t[in.Owner].expLo = in.CallWall + int64(o.TTL)
			}
			out = append(out, t)
			if ret < cur.holdLo {
				return out
			}
			base[in.Owner].held = false
		}
		for _, addrs := range candidates(p, o) {
			t := base
			if !m.fresh(p, &t, in.Owner, addrs, ret) {
				continue
			}
			t[in.Owner] = ownerState{alloc: true, addrs: addrs}
			if o.TTL > 0 {
				t[in.Owner].expLo = in.CallWall + int64(o.TTL)
			}
			out = appendState(out, t)
		}
	case OpRelease:
		if cur.alloc || cur.held {
			addrs := cur.addrs
			if !cur.alloc {
				addrs = cur.heldAddrs
			}
			t := s
			t[in.Owner] = ownerState{}
			if in.Hold > 0 {
				t[in.Owner] = ownerState{held: true, heldAddrs: addrs, holdLo: in.CallWall + int64(in.Hold)}
			}
			out = append(out, t)
		}
	}
	return out
}

func appendState(states []poolState, s poolState) []poolState {
	if slices.Contains(states, s) {
		return states
	}
	return append(states, s)
}

// candidates lists every address set owner o could be given in pool p.
func candidates(p *Pool, o *Owner) [][2]netip.Addr {
	if len(o.Requested) > 0 {
		a, _ := pack(o.Requested)
		return [][2]netip.Addr{a}
	}
	var out [][2]netip.Addr
	if !o.Dual {
		for _, a := range p.V4 {
			out = append(out, [2]netip.Addr{a})
		}
		return out
	}
	for _, a := range p.V4 {
		for _, b := range p.V6 {
			out = append(out, [2]netip.Addr{a, b})
		}
	}
	return out
}

// families lists the families an owner asks for: 0 IPv4, 1 IPv6.
func families(o *Owner) []int {
	if o.Dual {
		return []int{0, 1}
	}
	return []int{0}
}

// compatible reports whether two owners may share an address.
func compatible(a, b *Owner) bool {
	if a.Key == "" || a.Key != b.Key {
		return false
	}
	for _, p := range a.Ports {
		if slices.Contains(b.Ports, p) {
			return false
		}
	}
	return true
}

// pack puts addresses in family order; false if there are two of a family.
func pack(addrs []netip.Addr) ([2]netip.Addr, bool) {
	var out [2]netip.Addr
	for _, a := range addrs {
		f := 0
		if a.Is6() {
			f = 1
		}
		if out[f].IsValid() {
			return out, false
		}
		out[f] = a
	}
	return out, true
}

func (m *Model) describe(in Input, out Output) string {
	owner := m.pools[in.Pool].Owners[in.Owner].Name
	var b strings.Builder
	fmt.Fprintf(&b, "%s(%s", in.Kind, owner)
	if in.Hold > 0 {
		fmt.Fprintf(&b, ", hold %v", in.Hold)
	}
	if in.RequestID != "" {
		fmt.Fprintf(&b, ", id %s", in.RequestID)
	}
	b.WriteString(") -> ")
	switch out.Outcome {
	case OK:
		fmt.Fprintf(&b, "%v", out.Addrs)
		if out.Created {
			b.WriteString(" created")
		}
		if out.Expire != 0 {
			fmt.Fprintf(&b, " until %s", time.Unix(0, out.Expire).UTC().Format("15:04:05.000"))
		}
	case Refused:
		b.WriteString(out.Code)
	default:
		b.WriteString("unknown")
	}
	return b.String()
}

func describeState(s poolState) string {
	var parts []string
	for i, st := range s {
		if st.alloc {
			parts = append(parts, fmt.Sprintf("%d:%v", i, compact(st.addrs)))
		}
		if st.held {
			parts = append(parts, fmt.Sprintf("%d:held %v", i, compact(st.heldAddrs)))
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func compact(a [2]netip.Addr) []netip.Addr {
	return slices.DeleteFunc(a[:], func(x netip.Addr) bool { return !x.IsValid() })
}
