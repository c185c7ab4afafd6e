package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// sourcePath is dashboards/collapser.json, seen from test/tools/dashboardgen.
var sourcePath = filepath.Join("..", "..", "..", "dashboards", "collapser.json")

func generate(t *testing.T, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(args, &stdout, &stderr); err != nil {
		t.Fatalf("run(%q): %v (stderr: %s)", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// TestRun_WritesTheCommittedDashboard is make verify-dashboards' check from
// go test: the committed dashboard is this generator's output.
func TestRun_WritesTheCommittedDashboard(t *testing.T) {
	want, err := os.ReadFile(sourcePath)
	if err != nil {
		t.Fatal(err)
	}
	if got := generate(t); !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the generator's output: run make dashboards", sourcePath)
	}
}

func TestRun_WritesEveryOutFileAndNothingToStdout(t *testing.T) {
	want := generate(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if out := generate(t, "-out", a, "-out", b); len(out) != 0 {
		t.Errorf("stdout has %d bytes with -out, want none", len(out))
	}
	for _, path := range []string{a, b} {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the dashboard written to stdout", path)
		}
	}
}

func TestRun_RejectsArguments(t *testing.T) {
	for _, args := range [][]string{{"extra"}, {"-unknown"}} {
		if err := run(args, io.Discard, io.Discard); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}

func TestUnescapeHTML_WritesBackOnlyEncodingJSONsEscapes(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"a \u003e 0"`, `"a > 0"`},
		{`"\u003cb\u003e \u0026"`, `"<b> &"`},
		{`"\\u003e"`, `"\\u003e"`},           // a backslash, then the text u003e
		{`"\\\u003e"`, `"\\>"`},              // a backslash, then >
		{`"\u00e9 \n \""`, `"\u00e9 \n \""`}, // other escapes unchanged
		{`"\u003`, `"\u003`},                 // cut short
	}
	for _, tt := range tests {
		if got := string(unescapeHTML([]byte(tt.in))); got != tt.want {
			t.Errorf("unescapeHTML(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
