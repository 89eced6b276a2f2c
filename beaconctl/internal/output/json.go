package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// protojson deliberately varies its whitespace from build to build, so the
// CLI marshals compactly and re-indents with encoding/json, which gives the
// same bytes every time.
var marshal = protojson.MarshalOptions{}

// WriteJSON writes m as one indented JSON object followed by a newline.
func WriteJSON(w io.Writer, m proto.Message) error {
	b, err := marshal.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding %s as JSON: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return writeIndented(w, b)
}

// WriteJSONList writes ms as one indented JSON list followed by a newline;
// an empty list is written as [].
func WriteJSONList[M proto.Message](w io.Writer, ms []M) error {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, m := range ms {
		if i > 0 {
			buf.WriteByte(',')
		}
		b, err := marshal.Marshal(m)
		if err != nil {
			return fmt.Errorf("encoding %s as JSON: %w", m.ProtoReflect().Descriptor().FullName(), err)
		}
		buf.Write(b)
	}
	buf.WriteByte(']')
	return writeIndented(w, buf.Bytes())
}

// WriteJSONLine writes m as compact JSON on a single line, for streams that
// are read a line at a time.
func WriteJSONLine(w io.Writer, m proto.Message) error {
	b, err := marshal.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding %s as JSON: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return fmt.Errorf("compacting JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err = w.Write(buf.Bytes())
	return err
}

func writeIndented(w io.Writer, b []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return fmt.Errorf("indenting JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// WriteNames writes one name per line.
func WriteNames(w io.Writer, names ...string) error {
	for _, n := range names {
		if _, err := fmt.Fprintln(w, n); err != nil {
			return err
		}
	}
	return nil
}
