// Package envflag lets environment variables set a program's flags. Every
// flag has a variable named after it: with prefix "COLLAPSER_", --cache-ttl
// is read from COLLAPSER_CACHE_TTL. Variables are applied before the
// command line is parsed, so a flag given on the command line wins.
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"strings"
)

// Name returns the environment variable read for a flag.
func Name(prefix, flagName string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Apply sets every flag of fs whose variable getenv returns non-empty. An
// unparsable value is an error naming the variable and its value; all such
// errors are returned together.
func Apply(fs *flag.FlagSet, prefix string, getenv func(string) string) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		name := Name(prefix, f.Name)
		if v := getenv(name); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			}
		}
	})
	return errors.Join(errs...)
}
