package mdlinks

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// defaultTestTimeout bounds each git command.
const defaultTestTimeout = 30 * time.Second

// TestRepository_RelativeLinksAndAnchorsResolve is the check of make
// verify-links: every relative link in the Markdown files git knows of
// (committed or new, not ignored) names a file or directory of the
// repository, and its anchor a heading of the Markdown file it names.
func TestRepository_RelativeLinksAndAnchorsResolve(t *testing.T) {
	root := strings.TrimSpace(git(t, "rev-parse", "--show-toplevel"))
	var files []string
	for _, f := range strings.Split(git(t, "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"), "\x00") {
		if f == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(f))); err == nil { // not deleted in the work tree
			files = append(files, f)
		}
	}
	problems, err := Check(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	links, docs := 0, 0
	for _, f := range files {
		if isMarkdown(f) {
			b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
			if err != nil {
				t.Fatal(err)
			}
			docs, links = docs+1, links+len(Links(string(b)))
		}
	}
	t.Logf("%d links in %d Markdown files", links, docs)
}

func git(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), defaultTestTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", args...).Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

func TestSlug_FollowsGitHubsRules(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"Kubernetes: chart and observability", "kubernetes-chart-and-observability"},
		{"Measured against the alternatives", "measured-against-the-alternatives"},
		{"`make bench-peers`, step by step", "make-bench-peers-step-by-step"},
		{"snake_case and kebab-case", "snake_case-and-kebab-case"},
		{"What's new (v2.0)?", "whats-new-v20"},
		{"A  -- B", "a-----b"},
		{"Größe", "größe"},
	}
	for _, tt := range tests {
		if got := Slug(tt.heading); got != tt.want {
			t.Errorf("Slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

func TestAnchors_NumbersRepeatsAndSkipsCode(t *testing.T) {
	doc := "# Title\n\n## Policy\n\n```yaml\n# not a heading\n```\n\n## Policy\n\n" +
		"## [Linked](x.md) `code`\n\nSetext one\n===\n\nSetext two\n---\n\n<a id=\"custom\"></a>\n\n## Policy 1\n"
	got := Anchors(doc)
	want := map[string]bool{"title": true, "policy": true, "policy-1": true, "linked-code": true,
		"setext-one": true, "setext-two": true, "custom": true, "policy-1-1": true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Anchors = %v, want %v", got, want)
	}
}

func TestLinks_FindsInlineImagesAndDefinitionsOutsideCode(t *testing.T) {
	doc := "See [a](a.md) and ![img](i.png \"title\"), `[not](code.md)`.\n" +
		"A link [across\nlines](b/#x) and a span `across\n[lines](no.md)` too.\n\n" +
		"```\n[fenced](no.md)\n```\n\n[ref]: <c d.md>\n"
	got := Links(doc)
	want := []Link{{1, "a.md"}, {1, "i.png"}, {3, "b/#x"}, {10, "c d.md"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Links = %v, want %v", got, want)
	}
}

func TestCheck_ReportsMissingFilesAndAnchors(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n\n## Here\n\n[ok](#here) [bad](#gone) [doc](docs/guide.md#setup) "+
		"[doc bad](docs/guide.md#nope) [dir](docs) [dir anchor](docs/#setup) [missing](nothere.md) "+
		"[code](src/main.go#L3) [root](/docs/guide.md) [web](https://example.com/#x)\n")
	write("docs/guide.md", "## Setup\n\n[up](../README.md#top) [up bad](../README.md#top-1)\n")
	write("docs/README.md", "## Setup\n")
	write("src/main.go", "package main\n")
	problems, err := Check(root, []string{"README.md", "docs/README.md", "docs/guide.md", "src/main.go"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		"README.md:5: #gone: no heading in README.md has the anchor #gone",
		"README.md:5: docs/guide.md#nope: no heading in docs/guide.md has the anchor #nope",
		"README.md:5: nothere.md: no such file or directory in the repository",
		"docs/guide.md:3: ../README.md#top-1: no heading in README.md has the anchor #top-1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
