package cli

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// Logging is --log-level, --log-format and klog's -v. The fields hold the
// flag defaults until the flags are parsed.
type Logging struct {
	// Level is debug, info, warn or error (case does not matter).
	Level string
	// Format is text (slog's key=value lines) or json (one JSON object a
	// line).
	Format string

	levelGiven bool      // --log-level was on the command line
	v          verbosity // -v
}

// AddFlags registers the flags on fs, with l's fields as defaults.
func (l *Logging) AddFlags(fs *pflag.FlagSet) {
	fs.Var(&levelFlag{l}, "log-level", "least severe logs written: debug, info, warn or error")
	fs.StringVar(&l.Format, "log-format", l.Format, "text (key=value lines) or json (one object a line)")
	fs.VarP(&l.v, "v", "v", "klog's verbosity, instead of --log-level: 0 is info, 4 is debug, more shows client-go's V(n) lines up to n")
}

// levelFlag is --log-level, noting that it was given.
type levelFlag struct{ l *Logging }

func (f *levelFlag) String() string {
	if f.l == nil {
		return ""
	}
	return f.l.Level
}
func (f *levelFlag) Set(s string) error { f.l.Level, f.l.levelGiven = s, true; return nil }
func (f *levelFlag) Type() string       { return "string" }

// verbosity is a -v that remembers whether it was given.
type verbosity struct {
	n   int
	set bool
}

func (v *verbosity) String() string {
	if !v.set {
		return "0"
	}
	return strconv.Itoa(v.n)
}

func (v *verbosity) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return fmt.Errorf("want a number from 0 up")
	}
	v.n, v.set = n, true
	return nil
}

func (v *verbosity) Type() string { return "int" }

// slogLevel returns the level the flags select. -v=N is slog.Level(-N),
// the level klog's V(N) lines are written at once klog is routed to slog.
func (l *Logging) slogLevel() (slog.Level, error) {
	if l.v.set {
		if l.levelGiven {
			return 0, Usagef("--log-level %s and -v %d: give one of them", l.Level, l.v.n)
		}
		return slog.Level(-l.v.n), nil
	}
	switch strings.ToLower(l.Level) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, &FlagError{Flag: "--log-level", Value: l.Level, Want: "want debug, info, warn or error (or klog's -v=N)"}
}

// validate checks the flags.
func (l *Logging) validate() error {
	if _, err := l.slogLevel(); err != nil {
		return err
	}
	switch strings.ToLower(l.Format) {
	case "text", "json", "":
		return nil
	}
	return &FlagError{Flag: "--log-format", Value: l.Format, Want: "want text or json"}
}

// NewLogger validates the flags and returns a logger writing to w. It
// changes no global state (see Setup).
func (l *Logging) NewLogger(w io.Writer) (*slog.Logger, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	level, _ := l.slogLevel()
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(l.Format, "json") {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// Setup returns NewLogger(cmd.ErrOrStderr()) and makes it the process's one
// log stream: klog (client-go's logs) is routed to it, with klog's
// verbosity set to match the level, and Run logs a command's final error
// through it.
func (l *Logging) Setup(cmd *cobra.Command) (*slog.Logger, error) {
	log, err := l.NewLogger(cmd.ErrOrStderr())
	if err != nil {
		return nil, err
	}
	level, _ := l.slogLevel()
	v := 0
	if level < 0 {
		v = int(-level)
	}
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	if err := fs.Set("v", strconv.Itoa(v)); err != nil {
		return nil, fmt.Errorf("setting klog's verbosity: %w", err)
	}
	klog.SetSlogLogger(log)
	if s := stateOf(cmd); s != nil {
		s.logger = log
	}
	return log, nil
}
