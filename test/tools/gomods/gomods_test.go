package gomods

import (
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// defaultTestTimeout bounds each go command.
const defaultTestTimeout = 30 * time.Second

// requires returns the requirements of the go.mod in dir.
func requires(t *testing.T, dir string) []Require {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), defaultTestTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "edit", "-json")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json in %s: %v", dir, err)
	}
	reqs, err := Requires(out)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

// TestRepository_ModulesAgreeOnSharedVersions is the check of make
// verify-modules: the root module and test/ require each module they share
// at one version.
func TestRepository_ModulesAgreeOnSharedVersions(t *testing.T) {
	root, test := filepath.Join("..", "..", ".."), filepath.Join("..", "..")
	for _, d := range Disagreements(requires(t, root), requires(t, test)) {
		t.Errorf("%s: give both go.mod files the newer (go get MODULE@VERSION in the root, then go mod tidy in both)", d)
	}
}

func TestDisagreements_NamesEachSharedModuleAtTwoVersions(t *testing.T) {
	a := []Require{{"example.com/same", "v1.0.0"}, {"example.com/b", "v1.1.0"}, {"example.com/a", "v0.1.0"}, {"example.com/only-a", "v1.0.0"}}
	b := []Require{{"example.com/same", "v1.0.0"}, {"example.com/a", "v0.2.0"}, {"example.com/b", "v1.2.0"}, {"example.com/only-b", "v2.0.0"}}
	want := []string{
		"example.com/a: v0.1.0 in one module, v0.2.0 in the other",
		"example.com/b: v1.1.0 in one module, v1.2.0 in the other",
	}
	if got := Disagreements(a, b); !reflect.DeepEqual(got, want) {
		t.Errorf("Disagreements = %q, want %q", got, want)
	}
}

func TestRequires_ReadsGoModEditJSONAndRejectsOtherInput(t *testing.T) {
	got, err := Requires([]byte(`{"Module":{"Path":"m"},"Require":[{"Path":"example.com/x","Version":"v1.2.3","Indirect":true}]}`))
	if err != nil || !reflect.DeepEqual(got, []Require{{"example.com/x", "v1.2.3"}}) {
		t.Errorf("Requires = %v, %v", got, err)
	}
	if _, err := Requires([]byte("module m")); err == nil {
		t.Error("Requires of a go.mod's text: no error, want one")
	}
}
