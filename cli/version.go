package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set at link time for builds without VCS information (an image built
// from a source tarball, say):
//
//	go build -ldflags "-X github.com/kloop-dev/kloop/cli.version=v1.2.3 \
//	  -X github.com/kloop-dev/kloop/cli.revision=$(git rev-parse HEAD) \
//	  -X github.com/kloop-dev/kloop/cli.buildTime=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
//
// Each one set overrides what debug.ReadBuildInfo says.
var (
	version   string
	revision  string
	buildTime string
)

// Unknown is what versionInfo holds for what the binary does not know.
const Unknown = "unknown"

// versionInfo is what the version subcommand prints.
type versionInfo struct {
	// Version is the main module's version: a tag, a pseudo-version such
	// as v0.0.0-20260102150405-0123456789ab+dirty, or "(devel)".
	Version string
	// Revision is the VCS commit, or Unknown; Modified says the working
	// tree had uncommitted changes.
	Revision string
	Modified bool
	// CommitTime is the revision's commit time (vcs.time), or Unknown.
	CommitTime string
	// BuildTime is set only by -ldflags (the build info has none); "" if
	// not.
	BuildTime string
	// Go is the toolchain and platform, for example "go1.26.0 linux/amd64".
	Go string
}

// buildVersion returns the running binary's versionInfo.
func buildVersion() versionInfo {
	bi, _ := debug.ReadBuildInfo()
	return versionFrom(bi, version, revision, buildTime)
}

// versionFrom reads bi (nil when the binary has no build info) and applies
// the link-time overrides.
func versionFrom(bi *debug.BuildInfo, ldVersion, ldRevision, ldBuildTime string) versionInfo {
	v := versionInfo{
		Version:    "(devel)",
		Revision:   Unknown,
		CommitTime: Unknown,
		Go:         runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi != nil {
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			v.Go = bi.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.time":
				v.CommitTime = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if ldVersion != "" {
		v.Version = ldVersion
	}
	if ldRevision != "" {
		v.Revision = ldRevision
		v.Modified = false
	}
	v.BuildTime = ldBuildTime
	return v
}

// Write prints v under the program's name, one "key: value" a line after
// the first.
func (v versionInfo) Write(w io.Writer, name string) error {
	rev := v.Revision
	if v.Modified {
		rev += " (modified)"
	}
	_, err := fmt.Fprintf(w, "%s %s\nrevision: %s\ncommit time: %s\n", name, v.Version, rev, v.CommitTime)
	if err == nil && v.BuildTime != "" {
		_, err = fmt.Fprintf(w, "build time: %s\n", v.BuildTime)
	}
	if err == nil {
		_, err = fmt.Fprintf(w, "go: %s\n", v.Go)
	}
	return err
}

// versionCommand returns the "version" subcommand that Run adds to every
// command: it prints buildVersion() to stdout.
func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, VCS revision and build time of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return buildVersion().Write(cmd.OutOrStdout(), cmd.Root().Name())
		},
	}
}
