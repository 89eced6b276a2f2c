package output

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FormatError renders err for people, without a trailing newline. A gRPC
// status becomes "error: CODE: message", followed by one indented line per
// detail the server attached: field violations of a google.rpc.BadRequest
// ("field: description"), violations of a google.rpc.PreconditionFailure and
// the reason of a google.rpc.ErrorInfo. Any other error becomes
// "error: message".
func FormatError(err error) string {
	if err == nil {
		return ""
	}
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) || se.GRPCStatus() == nil {
		return "error: " + err.Error()
	}
	st := se.GRPCStatus()
	msg := st.Message()
	var b strings.Builder
	fmt.Fprintf(&b, "error: %s", st.Code())
	if msg != "" {
		fmt.Fprintf(&b, ": %s", msg)
	}
	line := func(s string) {
		// The server's message often repeats the only violation; say it once.
		if s != msg {
			fmt.Fprintf(&b, "\n  %s", s)
		}
	}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				line(joinNonEmpty(": ", v.GetField(), v.GetDescription()))
			}
		case *errdetails.PreconditionFailure:
			for _, v := range d.GetViolations() {
				line(joinNonEmpty(": ", joinNonEmpty(" ", v.GetType(), v.GetSubject()), v.GetDescription()))
			}
		case *errdetails.ErrorInfo:
			if d.GetReason() == "" {
				continue
			}
			s := "reason: " + d.GetReason()
			if md := d.GetMetadata(); len(md) > 0 {
				kv := make([]string, 0, len(md))
				for _, k := range slices.Sorted(maps.Keys(md)) {
					kv = append(kv, k+"="+md[k])
				}
				s += " (" + strings.Join(kv, ", ") + ")"
			}
			line(s)
		}
	}
	if st.Code() == codes.Unavailable {
		b.WriteString("\n  hint: is the server running and reachable? Set it with --server or BEACON_SERVER.")
	}
	return b.String()
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
