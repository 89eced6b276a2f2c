package main

import (
	"bufio"
	"encoding/json"
	"io"
	"iter"
)

// jsonLines yields each JSON object line of r.
func jsonLines(r io.Reader) iter.Seq[map[string]any] {
	return func(yield func(map[string]any) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				continue
			}
			if !yield(rec) {
				return
			}
		}
		_, _ = io.Copy(io.Discard, r)
	}
}
