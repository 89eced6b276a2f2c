package telemetry_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/beaconlb/beacon/pkg/telemetry"
)

func TestNewLogger(t *testing.T) {
	tests := []struct {
		level   string
		wantErr bool
		// levels of the records that come out when one record of each
		// level is logged, in order.
		want []string
	}{
		{level: "debug", want: []string{"DEBUG", "INFO", "WARN", "ERROR"}},
		{level: "info", want: []string{"INFO", "WARN", "ERROR"}},
		{level: "warn", want: []string{"WARN", "ERROR"}},
		{level: "error", want: []string{"ERROR"}},
		{level: "INFO", want: []string{"INFO", "WARN", "ERROR"}},
		{level: "", wantErr: true},
		{level: "warning", wantErr: true},
		{level: "trace", wantErr: true},
		{level: " info", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			var buf bytes.Buffer
			logger, err := telemetry.NewLogger(&buf, tt.level)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("NewLogger(%q) succeeded, want error", tt.level)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewLogger(%q): %v", tt.level, err)
			}
			logger.Debug("d", "k", 1)
			logger.Info("i", "k", 1)
			logger.Warn("w", "k", 1)
			logger.Error("e", "k", 1)

			var got []string
			for line := range strings.Lines(buf.String()) {
				var rec struct {
					Level string `json:"level"`
					Msg   string `json:"msg"`
					K     int    `json:"k"`
				}
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("line %q is not JSON: %v", line, err)
				}
				if rec.K != 1 {
					t.Errorf("line %q lost attribute k", line)
				}
				got = append(got, rec.Level)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("levels written (-want +got):\n%s", diff)
			}
		})
	}
}
