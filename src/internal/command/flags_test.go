package command

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name                   string
		args                   []string
		wantErr                string
		wantStdout, wantStderr bool
	}{
		{"flags", []string{"--n=2"}, "", false, false},
		{"help goes to stdout", []string{"-h"}, flag.ErrHelp.Error(), true, false},
		{"bad flag and usage go to stderr", []string{"--m=1"}, "not defined: -m", false, true},
		{"stray argument", []string{"--n=1", "extra"}, `unexpected arguments: ["extra"]`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("prog", flag.ContinueOnError)
			fs.Int("n", 0, "a number")
			var stdout, stderr bytes.Buffer
			err := ParseFlags(fs, tt.args, &stdout, &stderr)
			if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
			if tt.wantErr == flag.ErrHelp.Error() && !errors.Is(err, flag.ErrHelp) {
				t.Errorf("err = %v, want flag.ErrHelp", err)
			}
			if got := strings.Contains(stdout.String(), "a number"); got != tt.wantStdout {
				t.Errorf("usage on stdout = %v, want %v (%q)", got, tt.wantStdout, stdout.String())
			}
			if got := strings.Contains(stderr.String(), "a number"); got != tt.wantStderr {
				t.Errorf("usage on stderr = %v, want %v (%q)", got, tt.wantStderr, stderr.String())
			}
		})
	}
}
