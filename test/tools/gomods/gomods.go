// Package gomods holds the check of make verify-modules: the repository's
// two Go modules (the root and test/) require every module they share at
// the same version, so a test of test/ exercises the code the binaries are
// built with.
package gomods

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Require is one requirement of a go.mod file, as `go mod edit -json`
// prints it.
type Require struct {
	Path    string
	Version string
}

// Requires returns the requirements of a go.mod file from the output of
// `go mod edit -json`.
func Requires(editJSON []byte) ([]Require, error) {
	var mod struct{ Require []Require }
	if err := json.Unmarshal(editJSON, &mod); err != nil {
		return nil, fmt.Errorf("gomods: decode go mod edit -json: %w", err)
	}
	return mod.Require, nil
}

// Disagreements returns one line for each module that a and b both require
// at different versions, sorted by module path.
func Disagreements(a, b []Require) []string {
	versions := map[string]string{}
	for _, r := range a {
		versions[r.Path] = r.Version
	}
	var out []string
	for _, r := range b {
		if v, ok := versions[r.Path]; ok && v != r.Version {
			out = append(out, fmt.Sprintf("%s: %s in one module, %s in the other", r.Path, v, r.Version))
		}
	}
	sort.Strings(out)
	return out
}
