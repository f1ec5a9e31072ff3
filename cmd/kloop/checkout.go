package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
)

// modulePath is kloop's module path.
const modulePath = "github.com/kloop-dev/kloop"

// checkout is where the kloop source this binary was built from lives.
type checkout struct {
	// Dir is the root of the source: a clone of kloop's repository, or
	// the module cache's copy of a released version.
	Dir string
	// Version is the released version of kloop (from the module cache),
	// or "" for a checkout, which a new project then uses through a
	// replace directive.
	Version string
}

// errNoCheckout says that the source this binary was built from cannot be
// found, and what to do instead.
var errNoCheckout = errors.New("cannot find the kloop source this kloop binary was built from")

// findCheckout returns the kloop source given by --kloop-dir, else the one
// this binary was compiled from: the compiler records each source file's
// absolute path (unless built with -trimpath), and this file lies in
// cmd/kloop of that source.
func findCheckout(flagDir string) (checkout, error) {
	if flagDir != "" {
		dir, err := filepath.Abs(flagDir)
		if err != nil {
			return checkout{}, err
		}
		if !isKloopRoot(dir) {
			return checkout{}, fmt.Errorf("--kloop-dir %s: no go.mod of %s there; give the root of a kloop checkout", flagDir, modulePath)
		}
		return checkout{Dir: dir}, nil
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return checkout{}, fmt.Errorf("%w (it was built with -trimpath): pass --kloop-dir with the root of a kloop checkout", errNoCheckout)
	}
	dir := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	if !isKloopRoot(dir) {
		return checkout{}, fmt.Errorf("%w (%s has moved or is gone): pass --kloop-dir with the root of a kloop checkout", errNoCheckout, dir)
	}
	c := checkout{Dir: dir}
	// A released kloop (go install github.com/kloop-dev/kloop/cmd/kloop@v1.2.3)
	// is built from the module cache, whose directory names the version.
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Path == modulePath &&
		strings.HasSuffix(filepath.ToSlash(dir), "/"+modulePath+"@"+info.Main.Version) {
		c.Version = info.Main.Version
	}
	return c, nil
}

// isKloopRoot reports whether dir holds kloop's go.mod.
func isKloopRoot(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	return err == nil && bytes.HasPrefix(data, []byte("module "+modulePath+"\n"))
}
