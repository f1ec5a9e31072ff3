package kloop_test

import (
	"os"
	"strings"
	"testing"
)

// The README's "Write a controller" section quotes the Foo controller's
// wiring; every line it quotes must stand in the repository as quoted.
func TestREADME_QuotesTheFooControllersWiringAsItStands(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Write a controller")
	if !ok {
		t.Fatal(`README.md has no "## Write a controller" section`)
	}
	_, block, ok := strings.Cut(section, "```go\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("the section has no go code block")
	}
	var sources string
	for _, f := range []string{"samples/foo/foo.go", "cmd/foo-controller/main.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources += string(b)
	}
	lines := 0
	for _, l := range strings.Split(block, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		lines++
		if !strings.Contains(sources, l+"\n") {
			t.Errorf("README line not in samples/foo/foo.go or cmd/foo-controller/main.go: %q", l)
		}
	}
	// The wiring, without the two function headers and their closing
	// lines, is at most 25 lines.
	if wiring := lines - 4; wiring > 25 {
		t.Errorf("the Foo controller's wiring is %d lines, want at most 25", wiring)
	}
}
