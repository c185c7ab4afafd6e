// Package logrecorder keeps the records a slog.Logger writes, so that tests
// can assert what was logged and how often.
package logrecorder

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// Recorder is a slog.Handler that keeps every record. It is safe for
// concurrent use; the zero value is ready.
type Recorder struct {
	mu      sync.Mutex
	records []slog.Record // guarded by mu
}

// Enabled reports true: every level is kept.
func (r *Recorder) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps a copy of rec.
func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}

// WithAttrs returns r: attributes added to a logger are not kept.
func (r *Recorder) WithAttrs([]slog.Attr) slog.Handler { return r }

// WithGroup returns r: groups are not kept.
func (r *Recorder) WithGroup(string) slog.Handler { return r }

// Messages returns the messages of the records kept so far, in order.
func (r *Recorder) Messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.records))
	for i, rec := range r.records {
		out[i] = rec.Message
	}
	return out
}

// Count returns how many records have the level, a message starting with
// prefix and, unless key is "", the attribute key=value.
func (r *Recorder) Count(level slog.Level, prefix, key, value string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.records {
		if rec.Level != level || !strings.HasPrefix(rec.Message, prefix) {
			continue
		}
		match := key == ""
		rec.Attrs(func(a slog.Attr) bool {
			match = match || a.Key == key && a.Value.String() == value
			return !match
		})
		if match {
			n++
		}
	}
	return n
}

// Bytes returns the length of every message and attribute value recorded:
// roughly how much a log would have grown.
func (r *Recorder) Bytes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.records {
		n += len(rec.Message)
		rec.Attrs(func(a slog.Attr) bool {
			n += len(a.Key) + len(a.Value.String())
			return true
		})
	}
	return n
}
