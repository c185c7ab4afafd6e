package command

import (
	"errors"
	"flag"
	"io"
	"log/slog"
)

// The formats of --log-format.
const (
	LogJSON = "json" // one JSON object a line
	LogText = "text" // slog's key=value lines
)

// LogFlags defines --log-level and --log-format on fs, setting level and
// format and taking their values as defaults. --log-format takes LogJSON or
// LogText only.
func LogFlags(fs *flag.FlagSet, level *slog.Level, format *string) {
	fs.TextVar(level, "log-level", *level, "least severe log `level`: debug, info, warn or error")
	fs.Var(logFormat{format}, "log-format", "log `format`: json or text")
}

// logFormat is the --log-format flag.
type logFormat struct{ format *string }

func (f logFormat) String() string {
	if f.format == nil {
		return ""
	}
	return *f.format
}

func (f logFormat) Set(s string) error {
	if s != LogJSON && s != LogText {
		return errors.New("want json or text")
	}
	*f.format = s
	return nil
}

// NewLogger returns the logger of a program: format (LogJSON or LogText)
// lines at level and above, on w.
func NewLogger(level slog.Level, format string, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == LogText {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
