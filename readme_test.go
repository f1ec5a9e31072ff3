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

// The README's "Write an operator" section quotes the CronJob operator's
// webhook, controller and finalizer declarations; every line must stand in
// samples/cronjob/cronjob.go as quoted, and the per-kind webhook and
// controller wiring stays within 15 lines.
func TestREADME_QuotesTheCronJobOperatorsDeclarationsAsTheyStand(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Write an operator")
	if !ok {
		t.Fatal(`README.md has no "## Write an operator" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	src, err := os.ReadFile("samples/cronjob/cronjob.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for rest := section; ; blocks++ {
		var block string
		var found bool
		if _, rest, found = strings.Cut(rest, "```go\n"); !found {
			break
		}
		if block, rest, found = strings.Cut(rest, "```"); !found {
			t.Fatal("a go code block in the section is not closed")
		}
		lines := 0
		for _, l := range strings.Split(block, "\n") {
			if strings.TrimSpace(l) == "" {
				continue
			}
			lines++
			if !strings.Contains(string(src), l+"\n") {
				t.Errorf("README line not in samples/cronjob/cronjob.go: %q", l)
			}
		}
		if blocks == 0 && lines > 15 {
			t.Errorf("the CronJob's webhook and controller wiring is %d lines, want at most 15", lines)
		}
	}
	if blocks != 2 {
		t.Errorf("the section has %d go blocks, want 2 (the declarations, the finalizer call)", blocks)
	}
}
