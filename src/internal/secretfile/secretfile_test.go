package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// write writes secret into the file at path, as a rotation does.
func write(t *testing.T, path, secret string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestValue_AcceptsTheCurrentAndThePreviousSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	first, second, third := strings.Repeat("a", 32), strings.Repeat("b", 32), strings.Repeat("c", 32)
	write(t, path, first)
	v, err := Load(path, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		write    string
		current  string
		accepted []string
		refused  []string
	}{
		{"", first, []string{first}, []string{second, "", first[:31]}},
		{second, second, []string{first, second}, []string{third}},
		{third, third, []string{second, third}, []string{first}},
		{third, third, []string{second, third}, []string{first}}, // unchanged: the previous stays
	}
	for i, s := range steps {
		if s.write != "" {
			write(t, path, s.write)
			if err := v.Reload(); err != nil {
				t.Fatal(err)
			}
		}
		if got := v.Current(); got != s.current {
			t.Errorf("step %d: Current = %q, want %q", i, got, s.current)
		}
		for _, a := range s.accepted {
			if !v.Matches(a) {
				t.Errorf("step %d: %q refused, want accepted", i, a)
			}
		}
		for _, r := range s.refused {
			if v.Matches(r) {
				t.Errorf("step %d: %q accepted, want refused", i, r)
			}
		}
	}
}

func TestValue_RefusesAShortOrMissingSecret(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	write(t, short, strings.Repeat("a", 31))
	if _, err := Load(short, 32, nil); err == nil || !strings.Contains(err.Error(), "31 bytes, want at least 32") {
		t.Errorf("Load of 31 bytes: %v, want an error saying so", err)
	}
	if _, err := Load(filepath.Join(dir, "missing"), 32, nil); err == nil {
		t.Error("Load of a missing file: no error")
	}
	// A rotation to a bad file changes nothing.
	path := filepath.Join(dir, "token")
	good := strings.Repeat("g", 32)
	write(t, path, good)
	v, err := Load(path, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, "short")
	if err := v.Reload(); err == nil || v.Current() != good {
		t.Errorf("Reload of a short secret: %v, current %q; want an error and %q still", err, v.Current(), good)
	}
}
