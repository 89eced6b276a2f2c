package robustness

import (
	"net/netip"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// op is one operation of a hand-written history: times in seconds.
type op struct {
	call, ret float64
	kind      Kind
	owner     int
	hold      time.Duration
	out       Output
}

func ok(created bool, expire float64, as ...string) Output {
	o := Output{Outcome: OK, Created: created, Expire: at(expire)}
	if expire == 0 {
		o.Expire = 0
	}
	for _, a := range as {
		o.Addrs = append(o.Addrs, netip.MustParseAddr(a))
	}
	return o
}

func refused(code string) Output { return Output{Outcome: Refused, Code: code} }

var base = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC).UnixNano()

func at(s float64) int64 { return base + int64(s*float64(time.Second)) }

// The model accepts the histories a correct allocator may produce and
// refuses those that break a promise.
func TestModel(t *testing.T) {
	pools := []Pool{{Name: "p", V4: addrs("192.0.2.0", 0, 2), Owners: []Owner{
		{Name: "a", Hold: time.Second}, {Name: "b"}, {Name: "c", TTL: 10 * time.Second},
	}}}
	for _, tc := range []struct {
		name string
		ops  []op
		want porcupine.CheckResult
	}{
		{name: "two owners, one address, concurrently", want: porcupine.Illegal, ops: []op{
			{call: 0, ret: 1, kind: OpAllocate, owner: 0, out: ok(true, 0, "192.0.2.0")},
			{call: 0, ret: 1, kind: OpAllocate, owner: 1, out: ok(true, 0, "192.0.2.0")},
		}},
		{name: "one after the other's release", want: porcupine.Ok, ops: []op{
			{call: 0, ret: 1, kind: OpAllocate, owner: 0, out: ok(true, 0, "192.0.2.0")},
			{call: 1, ret: 2, kind: OpRelease, owner: 0, out: ok(false, 0, "192.0.2.0")},
			{call: 2, ret: 3, kind: OpAllocate, owner: 1, out: ok(true, 0, "192.0.2.0")},
		}},
		{name: "held address given away while another is free", want: porcupine.Illegal, ops: []op{
			{call: 0, ret: 1, kind: OpAllocate, owner: 0, out: ok(true, 0, "192.0.2.0")},
			{call: 1, ret: 2, kind: OpRelease, owner: 0, hold: time.Minute, out: ok(false, 61, "192.0.2.0")},
			{call: 2, ret: 3, kind: OpAllocate, owner: 1, out: ok(true, 0, "192.0.2.0")},
		}},
		{name: "held address reclaimed by a full pool, owner returns to the other", want: porcupine.Ok, ops: []op{
			{call: 0, ret: 1, kind: OpAllocate, owner: 0, out: ok(true, 0, "192.0.2.0")},
			{call: 0, ret: 1, kind: OpAllocate, owner: 2, out: ok(true, 10, "192.0.2.1")},
			{call: 1, ret: 2, kind: OpRelease, owner: 0, hold: time.Minute, out: ok(false, 61, "192.0.2.0")},
			{call: 2, ret: 3, kind: OpAllocate, owner: 1, out: ok(true, 0, "192.0.2.0")},
			{call: 3, ret: 4, kind: OpAllocate, owner: 0, out: refused(CodeExhausted)},
		}},
		{name: "a hold gives the owner its address back", want: porcupine.Illegal, ops: []op{
			{call: 0, ret: 1, kind: OpAllocate, owner: 0, out: ok(true, 0, "192.0.2.0")},
			{call: 1, ret: 2, kind: OpRelease, owner: 0, hold: time.Minute, out: ok(false, 61, "192.0.2.0")},
			{call: 2, ret: 3, kind: OpAllocate, owner: 0, out: ok(true, 0, "192.0.2.1")},
		}},
		{name: "an expired TTL frees the address", want: porcupine.Ok, ops: []op{
			{call: 0, ret: 1, kind: OpAllocate, owner: 2, out: ok(true, 10, "192.0.2.0")},
			{call: 11, ret: 12, kind: OpAllocate, owner: 1, out: ok(true, 0, "192.0.2.0")},
			{call: 12, ret: 13, kind: OpGet, owner: 2, out: refused(CodeNotFound)},
		}},
		{name: "a live TTL keeps it", want: porcupine.Illegal, ops: []op{
			{call: 0, ret: 1, kind: OpAllocate, owner: 2, out: ok(true, 10, "192.0.2.0")},
			{call: 5, ret: 6, kind: OpAllocate, owner: 1, out: ok(true, 0, "192.0.2.0")},
		}},
		{name: "exhausted with an address free", want: porcupine.Illegal, ops: []op{
			{call: 0, ret: 1, kind: OpAllocate, owner: 0, out: ok(true, 0, "192.0.2.0")},
			{call: 1, ret: 2, kind: OpAllocate, owner: 1, out: refused(CodeExhausted)},
		}},
		{name: "an unknown outcome explains a later read", want: porcupine.Ok, ops: []op{
			{call: 0, ret: 15, kind: OpAllocate, owner: 1, out: Output{Outcome: Unknown}},
			{call: 1, ret: 2, kind: OpGet, owner: 1, out: ok(false, 0, "192.0.2.1")},
			{call: 2, ret: 3, kind: OpAllocate, owner: 0, out: ok(true, 0, "192.0.2.0")},
		}},
		{name: "a read of what nobody allocated", want: porcupine.Illegal, ops: []op{
			{call: 1, ret: 2, kind: OpGet, owner: 1, out: ok(false, 0, "192.0.2.1")},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var history []porcupine.Operation
			for i, o := range tc.ops {
				in := Input{Pool: 0, Owner: o.owner, Kind: o.kind, Hold: o.hold, CallWall: at(o.call), ReturnWall: at(o.ret)}
				history = append(history, porcupine.Operation{ClientId: i, Input: in, Output: o.out, Call: at(o.call), Return: at(o.ret)})
			}
			if got := porcupine.CheckOperations(NewModel(pools).Porcupine(), history); (got && tc.want != porcupine.Ok) || (!got && tc.want == porcupine.Ok) {
				t.Errorf("linearizable = %v, want %s", got, tc.want)
			}
		})
	}
}
