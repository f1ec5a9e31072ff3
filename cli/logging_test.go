package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kloop-dev/kloop/cli"
)

func TestLogging_FormatsAndLevels(t *testing.T) {
	for _, tc := range []struct {
		l          cli.Logging
		wantLines  int // of the debug, info, warn and error lines written
		wantJSON   bool
		wantPrefix string
	}{
		{cli.Logging{Level: "info", Format: "text"}, 3, false, "time="},
		{cli.Logging{Level: "debug", Format: "json"}, 4, true, "{"},
		{cli.Logging{Level: "error", Format: "text"}, 1, false, "time="},
		{cli.Logging{}, 3, false, "time="}, // the zero value is info, text
	} {
		var b strings.Builder
		log, err := tc.l.NewLogger(&b)
		if err != nil {
			t.Fatal(err)
		}
		log.Debug("d")
		log.Info("i", "k", "v")
		log.Warn("w")
		log.Error("e")
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		if len(lines) != tc.wantLines {
			t.Errorf("%+v: %d lines, want %d:\n%s", tc.l, len(lines), tc.wantLines, b.String())
		}
		for _, l := range lines {
			if !strings.HasPrefix(l, tc.wantPrefix) {
				t.Errorf("%+v: line %q does not start with %q", tc.l, l, tc.wantPrefix)
			}
			if tc.wantJSON && !json.Valid([]byte(l)) {
				t.Errorf("%+v: line %q is not JSON", tc.l, l)
			}
		}
	}
}
