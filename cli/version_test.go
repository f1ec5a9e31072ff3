package cli

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionFrom_BuildInfoAndLinkTimeOverrides(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/kloop-dev/kloop", Version: "v0.0.0-20260102150405-0123456789ab+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef"},
			{Key: "vcs.time", Value: "2026-01-02T15:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	for _, tc := range []struct {
		name                string
		bi                  *debug.BuildInfo
		ldV, ldR, ldT       string
		version, rev, ctime string
		modified            bool
		buildTime           string
	}{
		{name: "no build info", version: "(devel)", rev: Unknown, ctime: Unknown},
		{name: "built without VCS", bi: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, version: "(devel)", rev: Unknown, ctime: Unknown},
		{name: "stamped by the go command", bi: stamped, version: "v0.0.0-20260102150405-0123456789ab+dirty", rev: "0123456789abcdef", ctime: "2026-01-02T15:04:05Z", modified: true},
		{name: "ldflags win", bi: stamped, ldV: "v1.2.3", ldR: "fedcba", ldT: "2026-02-03T04:05:06Z",
			version: "v1.2.3", rev: "fedcba", ctime: "2026-01-02T15:04:05Z", buildTime: "2026-02-03T04:05:06Z"},
		{name: "ldflags without VCS", bi: &debug.BuildInfo{}, ldR: "fedcba", version: "(devel)", rev: "fedcba", ctime: Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := versionFrom(tc.bi, tc.ldV, tc.ldR, tc.ldT)
			if v.Version != tc.version || v.Revision != tc.rev || v.CommitTime != tc.ctime || v.Modified != tc.modified || v.BuildTime != tc.buildTime {
				t.Errorf("got %+v", v)
			}
			if v.Go == "" {
				t.Error("no Go version")
			}
		})
	}
}

func TestVersionInfo_WritesOneKeyALine(t *testing.T) {
	var b strings.Builder
	v := versionInfo{Version: "v1.2.3", Revision: "abc", Modified: true, CommitTime: "T1", BuildTime: "T2", Go: "go1.26.0 linux/amd64"}
	if err := v.Write(&b, "tool"); err != nil {
		t.Fatal(err)
	}
	want := "tool v1.2.3\nrevision: abc (modified)\ncommit time: T1\nbuild time: T2\ngo: go1.26.0 linux/amd64\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
