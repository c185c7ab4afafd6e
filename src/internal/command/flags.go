package command

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
)

// ParseFlags parses args with fs. The usage goes to stdout when asked for
// with -h (the error is then flag.ErrHelp) and, after the error, to stderr
// when a flag is bad. The programs take no arguments besides flags, so any
// left over are an error.
func ParseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var usage bytes.Buffer
	fs.SetOutput(&usage)
	if err := fs.Parse(args); err != nil {
		out := stderr
		if errors.Is(err, flag.ErrHelp) {
			out = stdout
		}
		_, _ = usage.WriteTo(out) // nothing better to do if the terminal is gone
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return nil
}
