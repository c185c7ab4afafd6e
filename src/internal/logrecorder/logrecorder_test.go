package logrecorder

import (
	"log/slog"
	"testing"
)

func TestCount(t *testing.T) {
	r := &Recorder{}
	log := slog.New(r)
	log.Warn("unknown method", "method", "/a.B/C")
	log.Warn("unknown method", "method", "/a.B/D")
	log.Info("unknown method", "method", "/a.B/C")
	log.With("x", 1).Warn("other")
	tests := []struct {
		level              slog.Level
		prefix, key, value string
		want               int
	}{
		{slog.LevelWarn, "unknown", "", "", 2},
		{slog.LevelWarn, "unknown", "method", "/a.B/C", 1},
		{slog.LevelWarn, "unknown", "method", "/a.B/E", 0},
		{slog.LevelInfo, "unknown method", "", "", 1},
		{slog.LevelWarn, "", "", "", 3},
		{slog.LevelError, "", "", "", 0},
	}
	for _, tt := range tests {
		if got := r.Count(tt.level, tt.prefix, tt.key, tt.value); got != tt.want {
			t.Errorf("Count(%v, %q, %q, %q) = %d, want %d", tt.level, tt.prefix, tt.key, tt.value, got, tt.want)
		}
	}
}
