// Package envflag lets environment variables set a program's flags. Every
// flag has a variable named after it: with prefix "COLLAPSER_", --cache-ttl
// is read from COLLAPSER_CACHE_TTL. Variables are applied before the
// command line is parsed, so a flag given on the command line wins.
//
// One rule for empty variables: a variable that is set but empty sets its
// flag to the empty value, as --flag="" does (COLLAPSER_ADMIN_LISTEN=""
// turns the admin service off); a flag that takes no empty value (a
// duration, a number, a boolean) refuses it, naming the variable. Only an
// unset variable leaves the flag's default.
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

// Lookup reads an environment variable, and whether it is set at all (the
// shape of os.LookupEnv).
type Lookup func(name string) (value string, set bool)

// Apply sets every flag of fs whose variable lookup says is set, empty
// ones included. An unparsable value is an error naming the variable and
// its value; all such errors are returned together.
func Apply(fs *flag.FlagSet, prefix string, lookup Lookup) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		name := Name(prefix, f.Name)
		v, set := lookup(name)
		if !set {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			if v == "" {
				err = fmt.Errorf("set but empty, which --%s does not take: unset it or give it a value (%w)", f.Name, err)
			}
			errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
		}
	})
	return errors.Join(errs...)
}

// Usage returns a flag.FlagSet.Usage for a program whose flags prefix's
// variables can set: the synopsis, how the variables are named (with
// exampleFlag as the example) and the flags' defaults, on fs.Output().
func Usage(fs *flag.FlagSet, prefix, exampleFlag string) func() {
	return func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\nEvery flag can also be set by an environment variable named after it,\n"+
			"%s followed by the flag in upper case (--%s: %s); flags win.\n\n", fs.Name(), prefix, exampleFlag, Name(prefix, exampleFlag))
		fs.PrintDefaults()
	}
}
