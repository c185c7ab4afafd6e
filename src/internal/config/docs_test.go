package config

import (
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADME_ConfigurationTableMatchesTheFlags keeps the README's table true:
// every flag has its row, named after its variable, with its default first.
func TestREADME_ConfigurationTableMatchesTheFlags(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| (COLLAPSER_[A-Z_]+) \| --([a-z-]+) \| (.*) \|$`)
	rows := map[string][2]string{} // flag → variable, default cell
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		if _, dup := rows[m[2]]; dup {
			t.Errorf("README: --%s has two rows", m[2])
		}
		rows[m[2]] = [2]string{m[1], m[3]}
	}
	c := Default()
	flagSet(&c).VisitAll(func(f *flag.Flag) {
		r, ok := rows[f.Name]
		if !ok {
			t.Errorf("README: no row for --%s", f.Name)
			return
		}
		delete(rows, f.Name)
		if r[0] != EnvName(f.Name) {
			t.Errorf("README: --%s is read from %s, the table says %s", f.Name, EnvName(f.Name), r[0])
		}
		want := f.DefValue
		if want == "" {
			want = `""`
		}
		if got, _, _ := strings.Cut(r[1], " "); !strings.EqualFold(got, want) {
			t.Errorf("README: --%s defaults to %s, the table says %q", f.Name, want, r[1])
		}
	})
	for name := range rows {
		t.Errorf("README: a row for --%s, which the sidecar does not have", name)
	}
}
