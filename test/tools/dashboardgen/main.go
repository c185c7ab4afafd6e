// Command dashboardgen writes the collapser Grafana dashboard, built with the
// Grafana Foundation SDK, as JSON: to stdout, or to each file named by -out.
// dashboards/collapser.json and the Helm chart's copy are its output
// (scripts/dashboards.sh, make dashboards); edit the panels here, not there.
//
//	go run ./tools/dashboardgen -out ../dashboards/collapser.json
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "dashboardgen:", err)
		}
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	var outs []string
	fs := flag.NewFlagSet("dashboardgen", flag.ContinueOnError)
	fs.Func("out", "`file` to write the dashboard to (repeatable; none: stdout)", func(v string) error { outs = append(outs, v); return nil })
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	b, err := dashboardJSON()
	if err != nil {
		return err
	}
	if len(outs) == 0 {
		_, err := stdout.Write(b)
		return err
	}
	for _, path := range outs {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
