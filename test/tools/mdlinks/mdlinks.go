// Package mdlinks checks the relative links of a repository's Markdown files
// the way GitHub resolves them: each must name a file or directory of the
// repository, and a fragment (#anchor) in a link to a Markdown file must be
// the anchor of one of its headings. Its test walks the files git knows.
//
// Links are inline links and images, [text](target), and link reference
// definitions, [ref]: target, outside fenced code blocks and code spans.
// Links with a scheme (https:, mailto:) are not checked; neither is a fragment
// into a file that is not Markdown (GitHub's #L10 line anchors).
package mdlinks

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Link is a link target as written in a document, and the line it is on.
type Link struct {
	Line   int
	Target string
}

var (
	fence      = regexp.MustCompile("^ {0,3}(```+|~~~+)")
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*(<[^>]*>|[^\s)]+)(?:\s+"[^"]*")?\s*\)`)
	definition = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	setextLine = regexp.MustCompile(`^ {0,3}(?:=+|-+)[ \t]*$`)
	htmlAnchor = regexp.MustCompile(`<[a-zA-Z][^>]*\s(?:id|name)="([^"]+)"`)
	linkMarkup = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// block is a run of lines outside fenced code: a paragraph or heading, with
// the line number of its first line.
type block struct {
	first int
	lines []string
}

// blocks splits a document into its non-blank runs of lines outside fenced
// code blocks.
func blocks(doc string) []block {
	var out []block
	var cur *block
	var open string // the fence that opened the code block we are in
	for i, line := range strings.Split(doc, "\n") {
		if open != "" {
			if m := fence.FindStringSubmatch(line); m != nil && m[1][0] == open[0] && len(m[1]) >= len(open) &&
				strings.TrimSpace(line[strings.Index(line, m[1])+len(m[1]):]) == "" {
				open = ""
			}
			continue
		}
		if m := fence.FindStringSubmatch(line); m != nil {
			open, cur = m[1], nil
			continue
		}
		if strings.TrimSpace(line) == "" {
			cur = nil
			continue
		}
		if cur == nil {
			out = append(out, block{first: i + 1})
			cur = &out[len(out)-1]
		}
		cur.lines = append(cur.lines, line)
	}
	return out
}

// blankCodeSpans replaces every code span of s, backticks included, with
// spaces, keeping newlines, so that offsets into s still give its lines.
func blankCodeSpans(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := 1
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		closer := -1
		for j := i + n; j < len(b); {
			if b[j] != '`' {
				j++
				continue
			}
			m := 1
			for j+m < len(b) && b[j+m] == '`' {
				m++
			}
			if m == n {
				closer = j
				break
			}
			j += m
		}
		if closer < 0 { // a lone run of backticks is literal text
			i += n
			continue
		}
		for k := i; k < closer+n; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
		i = closer + n
	}
	return string(b)
}

// Links returns the link targets of a Markdown document in their order.
func Links(doc string) []Link {
	var out []Link
	for _, b := range blocks(doc) {
		text := blankCodeSpans(strings.Join(b.lines, "\n"))
		var found [][]int
		found = append(found, inlineLink.FindAllStringSubmatchIndex(text, -1)...)
		found = append(found, definition.FindAllStringSubmatchIndex(text, -1)...)
		for _, m := range found {
			target := strings.TrimSuffix(strings.TrimPrefix(text[m[2]:m[3]], "<"), ">")
			out = append(out, Link{Line: b.first + strings.Count(text[:m[2]], "\n"), Target: target})
		}
	}
	return out
}

// Slug is the anchor GitHub gives a heading whose text is text: lower case,
// each space a '-', every character that is not a letter, a digit, a mark,
// '-' or '_' dropped.
func Slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headingText is what a heading shows: links and images by their text, HTML
// tags and code span backticks gone.
func headingText(raw string) string {
	raw = linkMarkup.ReplaceAllString(raw, "$1")
	return htmlTag.ReplaceAllString(raw, "")
}

// Anchors returns the anchors of a Markdown document: one per heading (ATX
// and setext), a repeated one numbered as GitHub numbers it ("x", "x-1", ...),
// and the id and name attributes of its HTML tags.
func Anchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	occurrences := map[string]int{}
	add := func(text string) { // github-slugger's numbering of repeated slugs
		slug := Slug(headingText(text))
		base := slug
		for _, taken := occurrences[slug]; taken; _, taken = occurrences[slug] {
			occurrences[base]++
			slug = fmt.Sprintf("%s-%d", base, occurrences[base])
		}
		occurrences[slug] = 0
		anchors[slug] = true
	}
	for _, b := range blocks(doc) {
		var para []string // the lines of a paragraph a setext underline may close
		for _, line := range b.lines {
			switch {
			case atxHeading.MatchString(line):
				add(atxHeading.FindStringSubmatch(line)[1])
				para = nil
			case setextLine.MatchString(line) && len(para) > 0:
				add(strings.Join(para, " "))
				para = nil
			default:
				para = append(para, strings.TrimSpace(line))
			}
			for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
				anchors[m[1]] = true
			}
		}
	}
	return anchors
}

// Problem is a link that does not resolve.
type Problem struct {
	File   string // the Markdown file, relative to the root
	Line   int
	Target string
	Reason string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Target, p.Reason)
}

// Check resolves every relative link of the Markdown files among files, the
// slash-separated paths of a repository's files relative to root. A link's
// path is taken from its file's directory, or from root when it starts with
// '/'; it must be one of files or a directory holding some of them.
func Check(root string, files []string) ([]Problem, error) {
	isFile := map[string]bool{}
	isDir := map[string]bool{".": true}
	for _, f := range files {
		isFile[f] = true
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			isDir[d] = true
		}
	}
	anchorsOf := map[string]map[string]bool{}
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		return string(b), err
	}
	var problems []Problem
	for _, file := range files {
		if !isMarkdown(file) {
			continue
		}
		doc, err := read(file)
		if err != nil {
			return nil, err
		}
		for _, l := range Links(doc) {
			if scheme.MatchString(l.Target) || strings.HasPrefix(l.Target, "//") {
				continue
			}
			problem := func(format string, args ...any) {
				problems = append(problems, Problem{file, l.Line, l.Target, fmt.Sprintf(format, args...)})
			}
			rawPath, fragment, _ := strings.Cut(l.Target, "#")
			p, err := url.PathUnescape(rawPath)
			if err != nil {
				problem("bad escape: %v", err)
				continue
			}
			target := file
			switch {
			case p == "":
			case strings.HasPrefix(p, "/"):
				target = path.Clean(strings.TrimPrefix(p, "/"))
			default:
				target = path.Join(path.Dir(file), p)
			}
			if target == "" {
				target = "."
			}
			switch {
			case isFile[target]:
			case isDir[target]:
				target = path.Join(target, "README.md") // what GitHub shows for a directory
			default:
				problem("no such file or directory in the repository")
				continue
			}
			if fragment == "" || !isMarkdown(target) || !isFile[target] {
				continue
			}
			anchors, ok := anchorsOf[target]
			if !ok {
				doc, err := read(target)
				if err != nil {
					return nil, err
				}
				anchors = Anchors(doc)
				anchorsOf[target] = anchors
			}
			if f, err := url.PathUnescape(fragment); err != nil || !anchors[f] {
				problem("no heading in %s has the anchor #%s", target, fragment)
			}
		}
	}
	return problems, nil
}

func isMarkdown(name string) bool {
	return strings.HasSuffix(name, ".md") || strings.HasSuffix(name, ".markdown")
}
