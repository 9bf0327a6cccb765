package archtest

import (
	"bytes"
	"errors"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// Citations of repository docs. In Go comments and markdown text alike, a citation is a
// path from the repository root, docs/<path>.md, optionally followed by #<anchor> or by
// a heading in double quotes, with or without a comma before it. In markdown, the
// targets of links are citations too, resolved from the file's folder; a target that is
// only #<anchor> cites the file itself.
var (
	docRefRE  = regexp.MustCompile(`(?:^|[^\w./-])(docs/[\w./-]*\.md)(?:#([\w-]+)|,?[ \t]*"([^"]+)")?`)
	mdLinkRE  = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	headingRE = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	fenceRE   = regexp.MustCompile("^ {0,3}(```|~~~)")
	inlineRE  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// citation is one reference to a repository file, found at where (file:line).
type citation struct {
	where   string
	target  string // repository-relative, slash-separated
	heading string // the quoted heading, if any
	anchor  string // the #anchor, if any
}

// docIndex is what a cited markdown file offers: its headings' texts and their anchors.
type docIndex struct {
	headings map[string]bool
	anchors  map[string]bool
}

// resolver checks citations against the files read returns (repository-relative paths).
type resolver struct {
	read  func(name string) ([]byte, error)
	index map[string]*docIndex
}

// problem returns why c does not resolve, or "".
func (r *resolver) problem(c citation) string {
	data, err := r.read(c.target)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Sprintf("%s: cites %s, which does not exist", c.where, c.target)
		}
		return fmt.Sprintf("%s: cites %s: %v", c.where, c.target, err)
	}
	if c.heading == "" && c.anchor == "" {
		return ""
	}
	if !strings.HasSuffix(c.target, ".md") {
		return fmt.Sprintf("%s: cites a heading of %s, which is not markdown", c.where, c.target)
	}
	idx := r.index[c.target]
	if idx == nil {
		idx = indexDoc(string(data))
		r.index[c.target] = idx
	}
	switch {
	case c.heading != "" && !idx.headings[c.heading]:
		return fmt.Sprintf("%s: cites %s %q, but it has no such heading", c.where, c.target, c.heading)
	case c.anchor != "" && !idx.anchors[c.anchor]:
		return fmt.Sprintf("%s: cites %s#%s, but no heading of it has that anchor", c.where, c.target, c.anchor)
	}
	return ""
}

// indexDoc lists a markdown file's ATX headings, outside fenced code blocks. A heading is
// known by its text as written and with its backticks removed, and by its GitHub anchor.
func indexDoc(md string) *docIndex {
	idx := &docIndex{headings: map[string]bool{}, anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(md, "\n") {
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			switch {
			case fence == "":
				fence = m[1]
			case fence == m[1]:
				fence = ""
			}
			continue
		}
		m := headingRE.FindStringSubmatch(line)
		if fence != "" || m == nil {
			continue
		}
		text := m[2]
		idx.headings[text] = true
		idx.headings[strings.ReplaceAll(text, "`", "")] = true
		slug := slugify(text)
		if n := seen[slug]; n > 0 {
			idx.anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			idx.anchors[slug] = true
		}
		seen[slug]++
	}
	return idx
}

// slugify is GitHub's heading anchor: the rendered text lower-cased, every character
// but letters, digits, marks, '-', '_' and spaces dropped, spaces turned into '-'.
func slugify(heading string) string {
	heading = inlineRE.ReplaceAllString(heading, "$1") // a link renders as its text
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// text is source text with the line each byte came from, so a citation that wraps over
// lines is still found and reported at the line it starts on.
type text struct {
	s     string
	lines []int // line of s[i]
}

func (t *text) add(line int, s string) {
	if t.s != "" {
		t.s += " "
		t.lines = append(t.lines, line)
	}
	t.s += s
	for range len(s) {
		t.lines = append(t.lines, line)
	}
}

// goComments returns the comments of a Go source file, consecutive line comments joined.
func goComments(src []byte) []text {
	var s scanner.Scanner
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	s.Init(file, src, func(token.Position, string) {}, scanner.ScanComments)
	var out []text
	lastLine := -2
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		if tok != token.COMMENT {
			lastLine = -2
			continue
		}
		line := file.Line(pos)
		if !strings.HasPrefix(lit, "//") || line != lastLine+1 || len(out) == 0 {
			out = append(out, text{})
		}
		cur := &out[len(out)-1]
		if body, ok := strings.CutPrefix(lit, "//"); ok {
			cur.add(line, strings.TrimSpace(body))
			lastLine = line
			continue
		}
		for i, l := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(lit, "/*"), "*/"), "\n") {
			cur.add(line+i, strings.TrimSpace(l))
		}
		lastLine = -2
	}
}

// markdownText returns a markdown file as one text, lines joined by spaces.
func markdownText(src []byte) text {
	var t text
	for i, l := range strings.Split(string(src), "\n") {
		t.add(i+1, l)
	}
	return t
}

// textCitations finds the docs/… citations in t, found in file name.
func textCitations(name string, t text) []citation {
	var out []citation
	for _, m := range docRefRE.FindAllStringSubmatchIndex(t.s, -1) {
		c := citation{where: fmt.Sprintf("%s:%d", name, t.lines[m[2]]), target: t.s[m[2]:m[3]]}
		if m[4] >= 0 {
			c.anchor = t.s[m[4]:m[5]]
		}
		if m[6] >= 0 {
			c.heading = strings.TrimSpace(t.s[m[6]:m[7]])
		}
		c.target = path.Clean(c.target)
		out = append(out, c)
	}
	return out
}

// linkCitations finds the relative link targets of markdown file name (repository-
// relative): files, and anchors in markdown files. URLs are left alone.
func linkCitations(name string, t text) []citation {
	var out []citation
	for _, m := range mdLinkRE.FindAllStringSubmatchIndex(t.s, -1) {
		target := t.s[m[2]:m[3]]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		c := citation{where: fmt.Sprintf("%s:%d", name, t.lines[m[2]]), anchor: anchor, target: name}
		if file != "" {
			c.target = path.Join(path.Dir(name), file)
		}
		out = append(out, c)
	}
	return out
}

// citationsOf returns every citation in the file name with content src.
func citationsOf(name string, src []byte) []citation {
	switch {
	case strings.HasSuffix(name, ".go"):
		var out []citation
		for _, t := range goComments(src) {
			out = append(out, textCitations(name, t)...)
		}
		return out
	case strings.HasSuffix(name, ".md"):
		t := markdownText(src)
		return append(textCitations(name, t), linkCitations(name, t)...)
	}
	return nil
}

// TestDocCitationsResolve checks every citation of a repository doc in the comments of
// the repository's Go files and in its markdown files: the cited file exists, and so
// does the cited heading or anchor. Renaming a heading breaks the citations of it.
func TestDocCitationsResolve(t *testing.T) {
	root := repoRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.go", "*.md").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	r := &resolver{index: map[string]*docIndex{}, read: func(name string) ([]byte, error) {
		if !filepath.IsLocal(filepath.FromSlash(name)) {
			return nil, fs.ErrNotExist // outside the repository
		}
		p := filepath.Join(root, filepath.FromSlash(name))
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return nil, nil // a link to a folder
		}
		return os.ReadFile(p)
	}}
	checked := 0
	for _, name := range strings.Fields(string(out)) {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range citationsOf(name, src) {
			checked++
			if p := r.problem(c); p != "" {
				t.Error(p)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d citations; is the scan broken?", checked)
	}
	t.Logf("checked %d citations", checked)
}

// repoRoot is the top of the repository this package sits in.
func repoRoot(t *testing.T) string {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse: %v", err)
	}
	return string(bytes.TrimSpace(out))
}

// The checker on synthetic files: what resolves, and what a renamed heading, a moved
// page or a wrong anchor breaks.
func TestCitationChecker(t *testing.T) {
	page := "# Title\n\n## The `capsule` option\n\nText.\n\n```sh\n# not a heading\n```\n\n## Limits\n\n## Limits\n\n### Gateway keys: at install\n"
	files := map[string]string{"docs/guide.md": page, "docs/reference/other.md": "# Other\n\n## Errors (`E-RUN-…`)\n"}
	tests := []struct {
		name, file, src string
		problems        []string // substrings, one per expected problem, in order
	}{
		{name: "quoted heading", file: "a.go", src: "package a\n\n// See docs/guide.md \"Limits\".\n"},
		{name: "comma and quoted heading", file: "a.go", src: "package a\n\n// (docs/guide.md, \"Title\")\n"},
		{name: "heading with backticks, as written or without them", file: "a.go",
			src: "package a\n\n// docs/guide.md \"The `capsule` option\" and docs/guide.md \"The capsule option\"\n"},
		{name: "heading wrapped over comment lines", file: "a.go", src: "package a\n\n// See docs/guide.md, \"Gateway keys:\n// at install\".\nvar x int\n"},
		{name: "anchor", file: "a.go", src: "package a\n\n// docs/guide.md#the-capsule-option docs/guide.md#gateway-keys-at-install\n"},
		{name: "second heading of a name gets -1", file: "a.go", src: "package a\n\n// docs/guide.md#limits-1\n"},
		{name: "a bare file", file: "a.go", src: "package a\n\n// docs/guide.md\n"},
		{name: "renamed heading", file: "a.go", src: "package a\n\n// docs/guide.md \"Limit\"\n", problems: []string{`a.go:3: cites docs/guide.md "Limit"`}},
		{name: "anchor of a renamed heading", file: "a.go", src: "package a\n\n// docs/guide.md#limit\n", problems: []string{"a.go:3: cites docs/guide.md#limit"}},
		{name: "moved page", file: "a.go", src: "package a\n\n// docs/other.md \"Other\"\n", problems: []string{"a.go:3: cites docs/other.md, which does not exist"}},
		{name: "a heading inside a code block is none", file: "a.go", src: "package a\n\n// docs/guide.md \"not a heading\"\n", problems: []string{"no such heading"}},
		{name: "strings are not comments", file: "a.go", src: "package a\n\nvar s = \"docs/missing.md\"\n"},
		{name: "block comment, reported at its line", file: "a.go", src: "package a\n\n/*\nSee\ndocs/missing.md.\n*/\n", problems: []string{"a.go:5: cites docs/missing.md"}},
		{name: "not a docs path", file: "a.go", src: "package a\n\n// examples/docs/missing.md and ../docs/missing.md\n"},
		{name: "markdown text", file: "README.md", src: "See docs/reference/other.md \"Errors (`E-RUN-…`)\".\n"},
		{name: "markdown relative link and anchor", file: "docs/reference/x.md",
			src: "[a](other.md#errors-e-run-) [b](../guide.md#limits) [c](https://example.com/x.md#y)\n"},
		{name: "markdown link to a renamed heading", file: "docs/reference/x.md", src: "Text.\n\n[b](../guide.md#limitz)\n",
			problems: []string{"docs/reference/x.md:3: cites docs/guide.md#limitz"}},
		{name: "markdown link to a missing page", file: "docs/x.md", src: "[a](reference/gone.md)\n", problems: []string{"cites docs/reference/gone.md, which does not exist"}},
		{name: "markdown link to its own heading", file: "docs/guide.md", src: page + "\n[x](#limits) [y](#nowhere)\n", problems: []string{"cites docs/guide.md#nowhere"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &resolver{index: map[string]*docIndex{}, read: func(name string) ([]byte, error) {
				if name == tc.file {
					return []byte(tc.src), nil
				}
				if s, ok := files[name]; ok {
					return []byte(s), nil
				}
				return nil, fs.ErrNotExist
			}}
			var got []string
			for _, c := range citationsOf(tc.file, []byte(tc.src)) {
				if p := r.problem(c); p != "" {
					got = append(got, p)
				}
			}
			if len(got) != len(tc.problems) {
				t.Fatalf("problems %q, want %d matching %q", got, len(tc.problems), tc.problems)
			}
			for i, want := range tc.problems {
				if !strings.Contains(got[i], want) {
					t.Errorf("problem %q does not say %q", got[i], want)
				}
			}
		})
	}
}

func TestSlugify(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"The agent card's URL", "the-agent-cards-url"},
		{"The `capsule` global option", "the-capsule-global-option"},
		{"Manifest (`E-MAN-…`, `W-MAN-…`)", "manifest-e-man--w-man-"},
		{"Context, trace and observability", "context-trace-and-observability"},
		{"murmur:tool/run", "murmurtoolrun"},
		{"Why a notification gets `204` and runs nothing", "why-a-notification-gets-204-and-runs-nothing"},
		{"snake_case — and a dash", "snake_case--and-a-dash"},
		{"See [the docs](x.md)", "see-the-docs"},
	}
	for _, tc := range tests {
		if got := slugify(tc.heading); got != tc.want {
			t.Errorf("slugify(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}
