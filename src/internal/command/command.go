// Package command holds what every binary's main does: run the program
// until SIGINT or SIGTERM, and turn its error into an exit status.
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Run is a program: it serves or works until ctx ends, reading args (without
// the program name) and writing to stdout and stderr.
type Run func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// Main runs run with the process's arguments and standard streams, with a
// context that ends at SIGINT or SIGTERM, and exits 1 with the error
// prefixed by name if it fails. -h is not a failure.
func Main(name string, run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}
