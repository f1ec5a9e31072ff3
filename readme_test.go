package kloop_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readSection returns the text of file from the heading to the next heading
// of the same or a higher level, failing the test when there is none.
func readSection(t *testing.T, file, heading string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", file, heading)
	}
	section, _, _ = strings.Cut(section, "\n"+heading[:strings.IndexByte(heading, ' ')+1])
	return section
}

// codeBlocks returns the bodies of the section's fenced code blocks of the
// given language.
func codeBlocks(t *testing.T, section, lang string) []string {
	t.Helper()
	var blocks []string
	for rest := section; ; {
		var block string
		var found bool
		if _, rest, found = strings.Cut(rest, "```"+lang+"\n"); !found {
			return blocks
		}
		if block, rest, found = strings.Cut(rest, "```"); !found {
			t.Fatal("a code block is not closed")
		}
		blocks = append(blocks, block)
	}
}

// quotedLines checks that every non-blank line of block stands in sources
// as quoted, and returns how many there are.
func quotedLines(t *testing.T, block, sources, where string) int {
	t.Helper()
	lines := 0
	for l := range strings.SplitSeq(block, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		lines++
		if !strings.Contains(sources, l+"\n") {
			t.Errorf("quoted line not in %s: %q", where, l)
		}
	}
	return lines
}

func readFiles(t *testing.T, files ...string) string {
	t.Helper()
	var s string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s += string(b)
	}
	return s
}

// The README shows a controller in about a dozen lines: the Foo
// controller's Setup, every line as it stands in samples/foo/foo.go.
func TestREADME_QuotesAControllerInADozenLinesAsItStands(t *testing.T) {
	blocks := codeBlocks(t, readSection(t, "README.md", "## A controller"), "go")
	if len(blocks) != 1 {
		t.Fatalf("README's \"A controller\" has %d go blocks, want 1", len(blocks))
	}
	if n := quotedLines(t, blocks[0], readFiles(t, "samples/foo/foo.go"), "samples/foo/foo.go"); n > 14 {
		t.Errorf("README's controller is %d lines, want about a dozen (at most 14)", n)
	}
}

// docs/controllers.md's "Write a controller" section quotes the Foo
// controller's wiring; every line it quotes must stand in the repository as
// quoted.
func TestREADME_QuotesTheFooControllersWiringAsItStands(t *testing.T) {
	blocks := codeBlocks(t, readSection(t, "docs/controllers.md", "## Write a controller"), "go")
	if len(blocks) == 0 {
		t.Fatal("the section has no go code block")
	}
	const from = "samples/foo/foo.go or cmd/foo-controller/main.go"
	lines := quotedLines(t, blocks[0], readFiles(t, "samples/foo/foo.go", "cmd/foo-controller/main.go"), from)
	// The wiring, without the two function headers and their closing
	// lines, is at most 25 lines.
	if wiring := lines - 4; wiring > 25 {
		t.Errorf("the Foo controller's wiring is %d lines, want at most 25", wiring)
	}
}

// docs/controllers.md's "Write an operator" section quotes the CronJob
// operator's webhook, controller and finalizer declarations; every line
// must stand in samples/cronjob/cronjob.go as quoted, and the per-kind
// webhook and controller wiring stays within 15 lines.
func TestREADME_QuotesTheCronJobOperatorsDeclarationsAsTheyStand(t *testing.T) {
	blocks := codeBlocks(t, readSection(t, "docs/controllers.md", "## Write an operator"), "go")
	if len(blocks) != 2 {
		t.Fatalf("the section has %d go blocks, want 2 (the declarations, the finalizer call)", len(blocks))
	}
	src := readFiles(t, "samples/cronjob/cronjob.go")
	for i, block := range blocks {
		if n := quotedLines(t, block, src, "samples/cronjob/cronjob.go"); i == 0 && n > 15 {
			t.Errorf("the CronJob's webhook and controller wiring is %d lines, want at most 15", n)
		}
	}
}

// The README is the short way in: the two set-up commands, and the seed
// concepts' table.
func TestREADME_KeepsTheTwoCommandsAndTheSeedConcepts(t *testing.T) {
	blocks := codeBlocks(t, readSection(t, "README.md", "## Two commands"), "sh")
	if len(blocks) != 1 {
		t.Fatalf("README's \"Two commands\" has %d sh blocks, want 1", len(blocks))
	}
	var commands []string
	for l := range strings.SplitSeq(strings.TrimSpace(blocks[0]), "\n") {
		cmd, _, _ := strings.Cut(l, "#")
		commands = append(commands, strings.TrimSpace(cmd))
	}
	if got := strings.Join(commands, "; "); got != "make demo; make test" {
		t.Errorf("README's set-up commands are %q, want exactly \"make demo; make test\"", got)
	}

	table := readSection(t, "README.md", "## From the client-go literature to kloop")
	rows := map[string]bool{}
	for l := range strings.SplitSeq(table, "\n") {
		if cells := strings.Split(l, "|"); len(cells) > 2 {
			for name := range strings.SplitSeq(cells[1], ",") {
				rows[strings.TrimSpace(name)] = true
			}
		}
	}
	for _, seed := range []string{"Reflector", "ListWatch", "DeltaFIFO", "Indexer", "Informer", "SharedInformer",
		"SharedInformerFactory", "ResourceEventHandler", "ResyncPeriod", "WaitForCacheSync",
		"DeletedFinalStateUnknown", "Workqueue", "rate limiter", "syncHandler", "code-generator", "CRD"} {
		if !rows[seed] {
			t.Errorf("README's concept table has no row for %s", seed)
		}
	}
}

// The README and BENCHMARKS.md stay short: details live in docs/ and in
// git history.
func TestREADME_AndBenchmarksStayShort(t *testing.T) {
	for file, limit := range map[string]int64{"README.md": 15_000, "BENCHMARKS.md": 25_000} {
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() >= limit {
			t.Errorf("%s is %d bytes, want under %d: move detail into a page of docs/", file, fi.Size(), limit)
		}
	}
}

var (
	fencedCode = regexp.MustCompile("(?s)```.*?```")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// relativeLinks returns the targets of the Markdown links (and images) of
// a page, code left out, that point into the repository.
func relativeLinks(page string) []string {
	page = inlineCode.ReplaceAllString(fencedCode.ReplaceAllString(page, ""), "")
	var links []string
	for _, m := range mdLink.FindAllStringSubmatch(page, -1) {
		target, _, _ := strings.Cut(m[1], "#")
		if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		links = append(links, target)
	}
	return links
}

// Every page of docs/ is reachable from the README's map, and every
// relative link in the README and in docs/ leads to a file that exists.
func TestREADME_LinksEveryDocsPageAndEveryLinkResolves(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("docs/ has no pages")
	}
	readme := readFiles(t, "README.md")
	linked := map[string]bool{}
	for _, l := range relativeLinks(readme) {
		linked[filepath.Clean(l)] = true
	}
	for _, p := range pages {
		if !linked[p] {
			t.Errorf("README.md does not link %s: add it to the documentation map", p)
		}
	}
	for _, file := range append([]string{"README.md", "BENCHMARKS.md"}, pages...) {
		links := relativeLinks(readFiles(t, file))
		for _, l := range links {
			target := filepath.Join(filepath.Dir(file), l)
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links %s, which does not exist (%s)", file, l, target)
			}
		}
	}
}

// docs/testing.md and docs/unit-testing.md quote kloopfake's Examples of
// Start on a real control plane and of Lister().WaitFor; every line they
// quote must stand in kloopfake/example_test.go, where the Examples run.
func TestDocs_QuoteTheStartAndWaitForExamplesAsTheyStand(t *testing.T) {
	src := readFiles(t, "kloopfake/example_test.go")
	for _, s := range []struct{ file, heading string }{
		{"docs/testing.md", "## One reconcile by hand, on the real control plane"},
		{"docs/unit-testing.md", "## A write the App did not make"},
		{"docs/unit-testing.md", "## The same on a real control plane"},
	} {
		blocks := codeBlocks(t, readSection(t, s.file, s.heading), "go")
		if len(blocks) == 0 {
			t.Errorf("%s %q has no go block", s.file, s.heading)
		}
		for _, b := range blocks {
			quotedLines(t, b, src, "kloopfake/example_test.go")
		}
	}
}
