// Package output renders Beacon API resources for people and scripts: aligned
// tables, JSON (the canonical protobuf JSON mapping) and bare resource names,
// and renders errors with their google.rpc details.
package output

import (
	"fmt"
	"strings"
)

// Format is an output format selected with -o/--output.
type Format string

// The output formats.
const (
	// Table is aligned columns for people.
	Table Format = "table"
	// JSON is protobuf JSON, indented: one object per resource, or one list
	// for list commands.
	JSON Format = "json"
	// Name is one resource name per line.
	Name Format = "name"
)

// Formats returns every format, in the order help texts show them.
func Formats() []Format { return []Format{Table, JSON, Name} }

// ParseFormat parses the value of -o/--output.
func ParseFormat(s string) (Format, error) {
	formats := Formats()
	for _, f := range formats {
		if strings.EqualFold(s, string(f)) {
			return f, nil
		}
	}
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = string(f)
	}
	return "", fmt.Errorf("unknown output format %q: use one of %s", s, strings.Join(names, ", "))
}
