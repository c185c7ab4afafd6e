package command

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestLogFlags(t *testing.T) {
	level, format := slog.LevelWarn, LogJSON
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	LogFlags(fs, &level, &format)
	if err := fs.Parse([]string{"--log-level=debug", "--log-format=text"}); err != nil || level != slog.LevelDebug || format != LogText {
		t.Errorf("parse = %v: level %v, format %q; want debug, text", err, level, format)
	}
	if err := fs.Parse([]string{"--log-format=xml"}); err == nil || !strings.Contains(err.Error(), "-log-format: want json or text") || format != LogText {
		t.Errorf("--log-format=xml: err %v, format %q; want an error naming json and text, format unchanged", err, format)
	}
	var out bytes.Buffer
	NewLogger(slog.LevelInfo, format, &out).Info("hello", "k", "v")
	if got := out.String(); !strings.Contains(got, "msg=hello k=v") {
		t.Errorf("text logger wrote %q", got)
	}
}
