package robustness

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/anishathalye/porcupine"
)

// savedOp is one operation of a saved history.
type savedOp struct {
	Client int    `json:"client"`
	Input  Input  `json:"input"`
	Output Output `json:"output"`
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
}

type savedHistory struct {
	Seed uint64    `json:"seed"`
	Ops  []savedOp `json:"ops"`
}

// SaveHistory writes a history to path as JSON.
func SaveHistory(path string, seed uint64, ops []porcupine.Operation) error {
	h := savedHistory{Seed: seed}
	for _, op := range ops {
		h.Ops = append(h.Ops, savedOp{Client: op.ClientId, Input: op.Input.(Input), Output: op.Output.(Output), Call: op.Call, Return: op.Return})
	}
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// LoadHistory reads a history SaveHistory wrote.
func LoadHistory(path string) (uint64, []porcupine.Operation, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, err
	}
	var h savedHistory
	if err := json.Unmarshal(b, &h); err != nil {
		return 0, nil, fmt.Errorf("%s: %w", path, err)
	}
	ops := make([]porcupine.Operation, 0, len(h.Ops))
	for _, op := range h.Ops {
		ops = append(ops, porcupine.Operation{ClientId: op.Client, Input: op.Input, Output: op.Output, Call: op.Call, Return: op.Return})
	}
	return h.Seed, ops, nil
}
