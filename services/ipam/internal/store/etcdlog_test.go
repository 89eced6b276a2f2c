package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestEtcdLogger(t *testing.T) {
	var buf bytes.Buffer
	lg := etcdLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), zapcore.WarnLevel)
	lg.Info("below the level")
	lg.With(zap.String("member", "m0")).Warn("slow fdatasync", zap.Duration("took", 1500e6))
	lg.Error("setting up serving from embedded etcd failed.", zap.Error(http.ErrServerClosed))
	lg.Error("setting up serving from embedded etcd failed.", zap.Error(errors.New("accept tcp 127.0.0.1:1: use of closed network connection")))
	lg.Error("setting up serving from embedded etcd failed.", zap.Error(errors.New("listen tcp: address already in use")))

	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		delete(m, "time")
		got = append(got, m)
	}
	want := []map[string]any{
		{"level": "WARN", "msg": "slow fdatasync", "component": "etcd", "member": "m0", "took": "1.5s"},
		{"level": "ERROR", "msg": "setting up serving from embedded etcd failed.", "component": "etcd", "error": "listen tcp: address already in use"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
}
