package store

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdLogger returns a zap logger, for the embedded etcd, that writes into
// logger: etcd's messages then come out as the service's own structured
// JSON lines (with component=etcd) instead of a second format on stderr.
// Messages below min are dropped, and so are the errors etcd logs for its
// own listeners closing when it stops, which say nothing is wrong.
func etcdLogger(logger *slog.Logger, min zapcore.Level) *zap.Logger {
	return zap.New(&slogCore{logger: logger.With("component", "etcd"), min: min})
}

// slogCore is a zapcore.Core writing to a slog.Logger.
type slogCore struct {
	logger *slog.Logger
	min    zapcore.Level
	attrs  []any
}

func (c *slogCore) Enabled(l zapcore.Level) bool { return l >= c.min }

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{logger: c.logger, min: c.min, attrs: append(append([]any(nil), c.attrs...), attrsOf(fields)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	attrs := append(append([]any(nil), c.attrs...), attrsOf(fields)...)
	if shutdownNoise(e, attrs) {
		return nil
	}
	c.logger.Log(context.Background(), slogLevel(e.Level), e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

// attrsOf turns zap fields into slog key-value pairs.
func attrsOf(fields []zapcore.Field) []any {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]any, 0, 2*len(enc.Fields))
	for k, v := range enc.Fields {
		if d, ok := v.(time.Duration); ok {
			v = d.String() // as etcd's own log writes it
		}
		out = append(out, k, v)
	}
	return out
}

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// shutdownNoise reports the error etcd logs once per listener when it
// stops serving ("setting up serving from embedded etcd failed" with a
// closed server or listener).
func shutdownNoise(e zapcore.Entry, attrs []any) bool {
	if !strings.HasPrefix(e.Message, "setting up serving from embedded etcd failed") {
		return false
	}
	for i := 0; i+1 < len(attrs); i += 2 {
		if k, _ := attrs[i].(string); k != "error" {
			continue
		}
		s, _ := attrs[i+1].(string)
		return strings.Contains(s, "erver closed") || strings.Contains(s, "use of closed network connection")
	}
	return false
}
