package webhook

import (
	"strings"
	"testing"
)

func TestParseRange(t *testing.T) {
	tests := []struct {
		in, err string // err: part of the error; "" for none
	}{
		{"192.0.2.0/28", ""},
		{"192.0.2.1 - 192.0.2.9", ""},
		{"2001:db8::10-2001:db8::1", "reversed"},
		{"192.0.2.9-192.0.2.1", "reversed"},
		{"192.0.2.0/33", "not a CIDR"},
		{"192.0.2.300/28", "not a CIDR"},
		{"192.0.2.1-2001:db8::1", "mixes"},
		{"192.0.2.1-x", "not a range"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := parseRange(tt.in)
			if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("parseRange(%q) = %v, want an error with %q", tt.in, err, tt.err)
			}
		})
	}
}

func TestOverlaps(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"192.0.2.0/28", "192.0.2.15-192.0.2.20", true},
		{"192.0.2.0/28", "192.0.2.16/28", false},
		{"2001:db8::/120", "2001:db8::ff-2001:db8::1ff", true},
		{"192.0.2.0/24", "2001:db8::/32", false},
	}
	for _, tt := range tests {
		a, err1 := parseRange(tt.a)
		b, err2 := parseRange(tt.b)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if got := a.overlaps(b); got != tt.want || b.overlaps(a) != tt.want {
			t.Errorf("%s overlaps %s = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
