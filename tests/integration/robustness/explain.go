package robustness

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Explain describes where a history stops being linearizable: for each
// partition the checker could not order, the end of the longest order it
// found (each operation with the states it led to) and the operations it
// could not place after it.
func Explain(pools []Pool, ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	m := NewModel(pools)
	var b strings.Builder
	for _, part := range info.PartialLinearizationsOperations() {
		if len(part) == 0 {
			continue
		}
		longest := slices.MaxFunc(part, func(a, b []porcupine.Operation) int { return len(a) - len(b) })
		if len(longest) == 0 {
			continue
		}
		in0 := longest[0].Input.(Input)
		total := 0
		for _, op := range ops {
			if op.Input.(Input).Pool == in0.Pool {
				total++
			}
		}
		if len(longest) == total {
			continue // this pool's history is linearizable
		}
		fmt.Fprintf(&b, "pool %s: ordered %d operations, then stuck; the last ones:\n", pools[in0.Pool].Name, len(longest))
		states := []poolState{{}}
		for i, op := range longest {
			var next []poolState
			for _, s := range states {
				for _, t := range m.step(&pools[in0.Pool], s, op.Input.(Input), op.Output.(Output)) {
					next = appendState(next, t)
				}
			}
			states = next
			if i >= len(longest)-12 {
				fmt.Fprintf(&b, "  %s  %s\n      -> %s\n", span(op), m.describe(op.Input.(Input), op.Output.(Output)), describeStates(states))
			}
		}
		key := func(op porcupine.Operation) [3]int64 { return [3]int64{op.Call, op.Return, int64(op.ClientId)} }
		placed := map[[3]int64]bool{}
		for _, op := range longest {
			placed[key(op)] = true
		}
		var rest []porcupine.Operation
		for _, op := range ops {
			if op.Input.(Input).Pool == in0.Pool && !placed[key(op)] {
				rest = append(rest, op)
			}
		}
		slices.SortFunc(rest, func(a, b porcupine.Operation) int { return int(a.Call - b.Call) })
		fmt.Fprintf(&b, "  the first operations it could not place after them:\n")
		for _, op := range rest[:min(len(rest), 8)] {
			fmt.Fprintf(&b, "  %s  %s\n", span(op), m.describe(op.Input.(Input), op.Output.(Output)))
		}
	}
	return b.String()
}

func span(op porcupine.Operation) string {
	f := func(ns int64) string { return time.Unix(0, ns).UTC().Format("15:04:05.000") }
	return fmt.Sprintf("[%s %s c%d]", f(op.Call), f(op.Return), op.ClientId)
}

func describeStates(ss []poolState) string {
	var parts []string
	for _, s := range ss {
		parts = append(parts, describeState(s))
	}
	if len(parts) > 3 {
		parts = append(parts[:3], fmt.Sprintf("... %d states", len(parts)))
	}
	return strings.Join(parts, " | ")
}
